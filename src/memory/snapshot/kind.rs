//! What memory holds, as guessed from a real snapshot (PyTorch's memory profiler's categories),
//! and the evidence each guess was made from.

use serde::Serialize;

/// What memory holds (PyTorch's memory profiler's categories, less inputs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Guess {
    Parameters,
    /// Alive before the recording, when the optimizer step recorded made no state of its own:
    /// the parameters and the optimizer's state from earlier steps, together.
    ParametersAndState,
    OptimizerState,
    Gradients,
    Activations,
    /// Made and freed within one phase.
    Temporaries,
    /// Neither: inputs, buffers, a user's own tensors, or no stack at all.
    #[default]
    Other,
}

impl Guess {
    pub const ALL: [Guess; 7] = [
        Guess::Parameters,
        Guess::ParametersAndState,
        Guess::OptimizerState,
        Guess::Gradients,
        Guess::Activations,
        Guess::Temporaries,
        Guess::Other,
    ];
    /// Its words in English (the CLI's; the app's come from the catalogs: `guess-<key>`).
    pub fn name(self) -> &'static str {
        match self {
            Guess::Parameters => "parameters",
            Guess::ParametersAndState => "parameters and optimizer state",
            Guess::OptimizerState => "optimizer state",
            Guess::Gradients => "gradients",
            Guess::Activations => "activations",
            Guess::Temporaries => "temporaries",
            Guess::Other => "other",
        }
    }
    pub fn key(self) -> &'static str {
        match self {
            Guess::Parameters => "parameters",
            Guess::ParametersAndState => "parameters-and-state",
            Guess::OptimizerState => "optimizer",
            Guess::Gradients => "gradients",
            Guess::Activations => "activations",
            Guess::Temporaries => "temporaries",
            Guess::Other => "other",
        }
    }
}

/// Why a kind was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// oomlab's own export names it.
    Oomlab,
    /// Alive before the recording began and never freed.
    BeforeRecording,
    /// The same, and the optimizer step the recording holds made no state: the state was
    /// there before it too.
    BeforeRecordingWithState,
    /// Made during the backward, alive into the optimizer step.
    BackwardIntoStep,
    /// Made during the backward, alive when the recording ended (no step recorded after it).
    BackwardToEnd,
    /// Made during the optimizer step, alive after it.
    StepAndAfter,
    /// Made during the forward, freed during the backward.
    ForwardToBackward,
    /// Made during the forward, alive when the recording ended (no backward recorded after it).
    ForwardToEnd,
    /// Made and freed within one phase.
    WithinPhase,
    /// Its life says nothing: guessed from its stack's frames.
    #[default]
    Stack,
}

impl Evidence {
    /// In English (the CLI's and the JSON's; the app's words are `evidence-<key>`).
    pub fn text(self) -> &'static str {
        match self {
            Evidence::Oomlab => "named by oomlab's export",
            Evidence::BeforeRecording => "before the recording: alive before it began and never freed",
            Evidence::BeforeRecordingWithState => {
                "before the recording: alive before it began and never freed; the optimizer step recorded made no state, so its state from earlier steps is here too"
            }
            Evidence::BackwardIntoStep => "made during the backward, alive into the optimizer step",
            Evidence::BackwardToEnd => "made during the backward, alive when the recording ended",
            Evidence::StepAndAfter => "made during the optimizer step, alive after it",
            Evidence::ForwardToBackward => "made during the forward, freed during the backward",
            Evidence::ForwardToEnd => "made during the forward, alive when the recording ended",
            Evidence::WithinPhase => "made and freed within one phase",
            Evidence::Stack => "guessed from its stack",
        }
    }
    pub fn key(self) -> &'static str {
        match self {
            Evidence::Oomlab => "oomlab",
            Evidence::BeforeRecording => "before-recording",
            Evidence::BeforeRecordingWithState => "before-recording-with-state",
            Evidence::BackwardIntoStep => "backward-into-step",
            Evidence::BackwardToEnd => "backward-to-end",
            Evidence::StepAndAfter => "step-and-after",
            Evidence::ForwardToBackward => "forward-to-backward",
            Evidence::ForwardToEnd => "forward-to-end",
            Evidence::WithinPhase => "within-phase",
            Evidence::Stack => "stack",
        }
    }
    /// Whether the kind is a guess from the frames rather than read from the allocation's life
    /// or named by oomlab.
    pub fn is_guess(self) -> bool {
        self == Evidence::Stack
    }
}
