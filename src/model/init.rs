//! Deterministic initialisation from a seed.
//!
//! A small splitmix64 generator with Box–Muller normals is used instead of `rand`: the stream
//! must be bit-identical on every platform and across dependency upgrades, because the shared
//! link, the CPU backend and the GPU backend must all start from the same weights.

use super::params::{Init, ParamLayout};

/// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, good enough for initialisation and
/// batch sampling. Not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x6f6f_6d6c_6162_2121)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
    /// Standard normal (Box–Muller, one value per call).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// The flat parameter tensor, initialised GPT-2 style from `seed`. Padding stays zero.
pub fn init_params(layout: &ParamLayout, seed: u64) -> Vec<f32> {
    let mut flat = vec![0.0f32; crate::units::ix(layout.flat_len)];
    let mut rng = Rng::new(seed);
    for spec in &layout.specs {
        let Some(slot) = spec.host_range().and_then(|r| flat.get_mut(r)) else { continue };
        match spec.init {
            Init::Zeros => slot.fill(0.0),
            Init::Ones => slot.fill(1.0),
            Init::Uniform { bound } => {
                for x in slot.iter_mut() {
                    *x = ((rng.uniform() * 2.0 - 1.0) * bound as f64) as f32;
                }
            }
            Init::Normal { std } => {
                for x in slot.iter_mut() {
                    *x = (rng.normal() * std as f64) as f32;
                }
            }
        }
    }
    flat
}

/// The seed of the LoRA adapters' initialisation, derived from the model's seed (so that the
/// base weights are the same with and without LoRA).
pub fn lora_seed(seed: u64) -> u64 {
    seed ^ 0x4c6f_5241_4c6f_5241
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;

    #[test]
    fn init_is_deterministic_and_has_gpt2_statistics() {
        let layout = ParamLayout::new(&ModelConfig::toy(65));
        let a = init_params(&layout, 7);
        assert_eq!(a, init_params(&layout, 7));
        assert_ne!(a, init_params(&layout, 8));
        let r = layout.range(crate::model::params::ParamKind::Wte);
        let wte = &a[r.start as usize..r.end as usize];
        let n = wte.len() as f64;
        let mean = wte.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = wte.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 0.002, "mean {mean}");
        assert!((var.sqrt() - 0.02).abs() < 0.002, "std {}", var.sqrt());
        let r = layout.range(crate::model::params::ParamKind::Ln1W(0));
        let ln = &a[r.start as usize..r.end as usize];
        assert!(ln.iter().all(|&x| x == 1.0));
    }
}
