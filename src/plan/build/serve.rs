//! A serving step's plan (see [`crate::plan::serving`]): the training step's forward pass with
//! each block's attention over the KV cache, the logits of every new token, and nothing saved.

use super::{Builder, Mode};
use crate::model::ModelConfig;
use crate::model::params::{ParamKind, ParamLayout};
use crate::plan::serving::{ServeHandles, ServeStep};
use crate::plan::{
    Batches, Category, ConfigError, DType, Handles, Op, OptimizerConfig, Phase, Plan, Precision, Techniques, TensorId,
    View, op,
};

/// The step's inputs the blocks read (the caches are [`Builder::serve_caches`]).
#[derive(Clone, Copy)]
pub(super) struct ServeIo {
    pub slots: View,
    pub blocks: View,
    pub lens: View,
    pub block_size: usize,
}

impl Plan {
    /// The plan of one serving step of `model` stored in `precision`'s dtype (fp32, or the 16-bit
    /// type of mixed precision). The parameters come first, then each layer's cache: every
    /// step's plan keeps them at the same ids, so an executor goes from step to step with
    /// `reshape`, its parameters and caches where they were.
    pub fn serving(model: &ModelConfig, precision: Precision, step: &ServeStep) -> Result<Plan, ConfigError> {
        step.validate(model)?;
        // The requests are the batch: one forward pass, no accumulation, one GPU.
        let batches = Batches::micro(step.requests, 1, 1)?;
        Ok(serving(model, precision, step, batches))
    }
}

/// The plan of one validated serving step.
fn serving(model: &ModelConfig, precision: Precision, step: &ServeStep, batches: Batches) -> Plan {
    let techniques = Techniques { precision, ..Techniques::default() };
    let shape = step.shape();
    let none = View { tensor: TensorId(0), offset: 0, len: 0 };
    let b = Builder {
        model: *model,
        shape,
        batches,
        optimizer: OptimizerConfig::default(),
        techniques,
        layout: ParamLayout::new(model),
        tensors: Vec::new(),
        ops: Vec::new(),
        params: none,
        trainable: none,
        grads: none,
        master: None,
        dt: precision.dtype(),
        lora: None,
        micro: 0,
        // Nothing is saved for a backward pass: every intermediate dies within the step.
        mode: Mode::Discard,
        rank: 0,
        dp: None,
        host: None,
        packing: None,
        serve: None,
        serve_caches: Vec::new(),
    };
    b.serve_forward(step)
}

impl Builder {
    fn serve_forward(mut self, step: &ServeStep) -> Plan {
        let (bt, t) = (step.requests as u64, step.new_tokens as u64);
        let c = self.model.d_model as u64;
        let rows = bt * t;
        let dt = self.dt;
        // The kept tensors first, at the same ids in every step's plan.
        self.params = self.tensor("parameters", &[self.layout.flat_len], dt, Category::Parameters, None);
        (self.trainable, self.grads) = (self.params, self.params);
        self.serve_caches = (0..self.model.n_layers)
            .map(|i| self.tensor(format!("h.{i}.kv_cache"), &[step.pool_slots, 2, c], dt, Category::KvCache, Some(i)))
            .collect();
        let input = |s: &mut Self, name: &str, shape: &[u64]| {
            s.tensor(format!("input.{name}"), shape, DType::U32, Category::Input, None)
        };
        let tokens = input(&mut self, "tokens", &[bt, t]);
        let positions = input(&mut self, "positions", &[rows]);
        let slots = input(&mut self, "slots", &[rows]);
        let blocks = input(&mut self, "block_tables", &[bt, step.table_width as u64]);
        let lens = input(&mut self, "lens", &[bt]);
        self.serve = Some(ServeIo { slots, blocks, lens, block_size: step.block_size });

        let tmp = Category::Temporaries;
        let encoded = self.act("embed.out", &[bt, t, c], tmp, None);
        let embed = op::Embedding {
            tokens,
            wte: self.p(ParamKind::Wte),
            wpe: self.p(ParamKind::Wpe),
            out: encoded,
            packing: None,
            positions: Some(positions),
        };
        self.push(Phase::Forward, "embed", Op::Embedding(embed));
        let mut x = encoded;
        for i in 0..self.model.n_layers {
            x = self.block_forward(i, x, tmp).1;
        }
        let logits = self.norm_and_head(x, tmp).3;
        let serving = ServeHandles {
            tokens: tokens.tensor,
            positions: positions.tensor,
            slots: slots.tensor,
            blocks: blocks.tensor,
            lens: lens.tensor,
            logits: logits.tensor,
            caches: self.serve_caches.iter().map(|v| v.tensor).collect(),
        };
        // No gradients, optimizer or master weights: their handles name the parameters, which
        // nothing in a serving step writes.
        let handles = Handles {
            params: self.params.tensor,
            trainable: self.params.tensor,
            grads: self.params.tensor,
            master: None,
            found_inf: None,
            micro: Vec::new(),
            serving: Some(serving),
        };
        Plan {
            model: self.model,
            shape: self.shape,
            batches: self.batches,
            optimizer: self.optimizer,
            techniques: self.techniques,
            layout: self.layout,
            lora: None,
            tensors: self.tensors,
            ops: self.ops,
            handles,
            rank: 0,
        }
    }
}
