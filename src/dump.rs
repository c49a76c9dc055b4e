//! `dump-step` files: a Hugging Face `GPT2Config`, the weights under Hugging Face GPT-2 names
//! and layouts, the batch, the gradients and the loss, so `transformers`' `GPT2LMHeadModel`
//! can reproduce the loss and every gradient.

use std::collections::HashMap;
use std::path::Path;

use safetensors::Dtype;
use safetensors::tensor::TensorView;
use thiserror::Error;

use crate::data::Batch;
use crate::model::{ModelConfig, ParamLayout};

#[derive(Debug, Error)]
pub enum DumpError {
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("safetensors: {0}")]
    SafeTensors(#[from] safetensors::SafeTensorError),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Format(String),
}

/// The model as a Hugging Face `GPT2Config` (config.json).
pub fn hf_config(model: &ModelConfig) -> serde_json::Value {
    serde_json::json!({
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": model.vocab,
        "n_positions": model.seq_len,
        "n_ctx": model.seq_len,
        "n_embd": model.d_model,
        "n_layer": model.n_layers,
        "n_head": model.n_heads,
        "n_inner": null,
        "activation_function": "gelu_new",
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "layer_norm_epsilon": 1e-5,
        "initializer_range": 0.02,
        "scale_attn_weights": true,
        "scale_attn_by_inverse_layer_idx": false,
        "reorder_and_upcast_attn": false,
        "tie_word_embeddings": true,
        "use_cache": false,
        "bos_token_id": 0,
        "eos_token_id": 0
    })
}

/// Creates `dir` and writes the model as both dumps do (config.json, model.safetensors with
/// `params`); returns the writer of the dump's other text files.
fn model_files<'a>(
    dir: &'a Path,
    model: &ModelConfig,
    layout: &ParamLayout,
    params: &[f32],
) -> Result<impl Fn(&str, String) -> Result<(), DumpError> + 'a, DumpError> {
    std::fs::create_dir_all(dir).map_err(|source| DumpError::Io { path: dir.display().to_string(), source })?;
    let write_text = move |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .map_err(|source| DumpError::Io { path: dir.join(name).display().to_string(), source })
    };
    write_text("config.json", serde_json::to_string_pretty(&hf_config(model))?)?;
    write_f32(&dir.join("model.safetensors"), &split_flat(layout, params))?;
    Ok(write_text)
}

/// One named f32 tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

/// Splits a flat parameter-layout tensor (parameters or gradients) into named tensors.
pub fn split_flat(layout: &ParamLayout, flat: &[f32]) -> Vec<NamedTensor> {
    layout
        .specs
        .iter()
        .map(|s| NamedTensor {
            name: s.name.clone(),
            shape: s.shape.iter().map(|&d| crate::backend::ix(d)).collect(),
            values: s.host_range().and_then(|r| flat.get(r)).map(<[f32]>::to_vec).unwrap_or_default(),
        })
        .collect()
}

fn write_f32(path: &Path, tensors: &[NamedTensor]) -> Result<(), DumpError> {
    let data: Vec<(String, Vec<u8>, Vec<usize>)> =
        tensors.iter().map(|t| (t.name.clone(), bytemuck::cast_slice(&t.values).to_vec(), t.shape.clone())).collect();
    let views = data
        .iter()
        .map(|(name, bytes, shape)| Ok((name.as_str(), TensorView::new(Dtype::F32, shape.clone(), bytes)?)))
        .collect::<Result<Vec<_>, DumpError>>()?;
    let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize_to_file(views, Some(meta), path)?;
    Ok(())
}

/// Reads every f32 tensor of a safetensors file, sorted by name.
pub fn read_f32(path: &Path) -> Result<Vec<NamedTensor>, DumpError> {
    let bytes = std::fs::read(path).map_err(|source| DumpError::Io { path: path.display().to_string(), source })?;
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(DumpError::Format(format!("{name} is {:?}, expected F32", view.dtype())));
        }
        out.push(NamedTensor { name, shape: view.shape().to_vec(), values: bytemuck::pod_collect_to_vec(view.data()) });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The flat parameters of `layout` from named tensors (what [`split_flat`] splits, read back):
/// every parameter must be there, with its shape. Padding between them is zero.
pub fn join_flat(layout: &ParamLayout, tensors: &[NamedTensor]) -> Result<Vec<f32>, DumpError> {
    let mut flat = vec![0.0f32; crate::backend::ix(layout.flat_len)];
    for s in &layout.specs {
        let shape: Vec<usize> = s.shape.iter().map(|&d| crate::backend::ix(d)).collect();
        let t = tensors
            .iter()
            .find(|t| t.name == s.name)
            .ok_or_else(|| DumpError::Format(format!("{} is missing", s.name)))?;
        if t.shape != shape {
            return Err(DumpError::Format(format!("{} is {:?}, expected {:?}", s.name, t.shape, shape)));
        }
        let range = s.host_range().filter(|r| r.len() == t.values.len());
        let dst =
            range.and_then(|r| flat.get_mut(r)).ok_or_else(|| DumpError::Format(format!("{} does not fit", s.name)))?;
        dst.copy_from_slice(&t.values);
    }
    Ok(flat)
}

/// One request's prompt and the tokens generated after it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Generation {
    pub prompt: Vec<u32>,
    pub tokens: Vec<u32>,
}

/// What `serving --dump` writes: the model as `dump-step` writes it (config.json,
/// model.safetensors) and `generations.json`, each request's prompt and greedy tokens, so that
/// transformers' `generate` can be asked for the same (scripts/check_generate.py).
pub struct GenerationDump<'a> {
    pub model: &'a ModelConfig,
    pub layout: &'a ParamLayout,
    pub params: &'a [f32],
    pub generations: &'a [Generation],
}

impl GenerationDump<'_> {
    pub fn write(&self, dir: &Path) -> Result<(), DumpError> {
        let write_text = model_files(dir, self.model, self.layout, self.params)?;
        write_text("generations.json", serde_json::to_string(&self.generations)?)?;
        Ok(())
    }
}

/// Reads a `generations.json`.
pub fn read_generations(path: &Path) -> Result<Vec<Generation>, DumpError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| DumpError::Io { path: path.display().to_string(), source })?;
    Ok(serde_json::from_str(&text)?)
}

/// The contents of `batch.safetensors`.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchFile {
    /// (B, T).
    pub shape: Vec<usize>,
    pub input_ids: Vec<i64>,
    pub labels: Vec<i64>,
}

/// Reads the i64 `input_ids` and `labels` of a batch file.
pub fn read_batch(path: &Path) -> Result<BatchFile, DumpError> {
    let bytes = std::fs::read(path).map_err(|source| DumpError::Io { path: path.display().to_string(), source })?;
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    let get = |name: &str| -> Result<(Vec<usize>, Vec<i64>), DumpError> {
        let v = st.tensor(name)?;
        if v.dtype() != Dtype::I64 {
            return Err(DumpError::Format(format!("{name} is {:?}, expected I64", v.dtype())));
        }
        Ok((v.shape().to_vec(), bytemuck::pod_collect_to_vec(v.data())))
    };
    let (shape, input_ids) = get("input_ids")?;
    let (_, labels) = get("labels")?;
    Ok(BatchFile { shape, input_ids, labels })
}

/// What `dump-step` writes.
pub struct StepDump<'a> {
    pub model: &'a ModelConfig,
    pub layout: &'a ParamLayout,
    pub initial_params: &'a [f32],
    pub grads: &'a [f32],
    pub batch: &'a Batch,
    pub loss: f32,
    pub backend: String,
}

impl StepDump<'_> {
    pub fn write(&self, dir: &Path) -> Result<(), DumpError> {
        let write_text = model_files(dir, self.model, self.layout, self.initial_params)?;
        write_f32(&dir.join("grads.safetensors"), &split_flat(self.layout, self.grads))?;
        let shape = vec![self.batch.shape.batch, self.batch.shape.seq];
        let ids: Vec<i64> = self.batch.inputs.iter().map(|&x| x as i64).collect();
        let labels: Vec<i64> = self.batch.targets.iter().map(|&x| x as i64).collect();
        let (ib, lb): (&[u8], &[u8]) = (bytemuck::cast_slice(&ids), bytemuck::cast_slice(&labels));
        let views = vec![
            ("input_ids", TensorView::new(Dtype::I64, shape.clone(), ib)?),
            ("labels", TensorView::new(Dtype::I64, shape, lb)?),
        ];
        safetensors::serialize_to_file(views, None, &dir.join("batch.safetensors"))?;
        let loss = serde_json::json!({
            "loss": self.loss,
            "reduction": "mean cross-entropy over all B·T positions; labels are already shifted (labels[b, t] is the token after input_ids[b, t])",
            "backend": self.backend,
        });
        write_text("loss.json", serde_json::to_string_pretty(&loss)?)?;
        Ok(())
    }
}
