//! The lines above the views (notices), in the reader's language.

/// A line above the views: a catalog message whose arguments may be notices too, shown in
/// the reader's language (switching language re-words it), or text that comes already worded
/// (a library's own error message).
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    Message {
        key: &'static str,
        args: Vec<(&'static str, Notice)>,
    },
    Text(String),
    /// Why the estimator refuses a setup: worded in the reader's language when shown.
    Refusal(crate::estimate::EstimateError),
    /// Why a toy configuration cannot be built: worded in the reader's language when shown.
    Config(crate::plan::ConfigError),
    /// Why the CPU backend's host cannot hold a step: worded in the reader's language.
    Host(crate::backend::HostShortfall),
    /// Why a step did not run (the GPU's, the backend's): worded in the reader's language.
    Backend(StepFailed),
}

/// A backend's error as a notice holds it: two are the same notice when they read the same.
#[derive(Clone, Debug)]
pub struct StepFailed(pub Box<crate::backend::BackendError>);

impl PartialEq for StepFailed {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl From<crate::backend::BackendError> for Notice {
    fn from(e: crate::backend::BackendError) -> Self {
        Notice::Backend(StepFailed(Box::new(e)))
    }
}

impl From<String> for Notice {
    fn from(s: String) -> Self {
        Notice::Text(s)
    }
}

impl Notice {
    pub fn msg(key: &'static str, args: &[(&'static str, Notice)]) -> Self {
        Notice::Message { key, args: args.to_vec() }
    }

    /// The notice in `t`'s language.
    pub fn text(&self, t: &crate::i18n::Catalog) -> String {
        match self {
            Notice::Message { key, args } => {
                let args: Vec<(&str, fluent_bundle::FluentValue<'_>)> =
                    args.iter().map(|(k, v)| (*k, v.text(t).into())).collect();
                t.format(key, &args)
            }
            Notice::Text(s) => s.clone(),
            Notice::Refusal(e) => e.text(t),
            Notice::Config(e) => e.text(t),
            Notice::Host(h) => h.text(t),
            Notice::Backend(e) => e.0.text(t),
        }
    }
}
