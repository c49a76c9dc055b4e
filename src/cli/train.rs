//! `train` and `dump-step`.

use super::*;

/// What `train --json` reports after each step, one JSON line per step (fields in the
/// alphabetical order of every oomlab document).
#[derive(serde::Serialize)]
pub(super) struct TrainLine {
    elapsed_secs: f64,
    /// Widened to f64 as the JSON has always shown it.
    loss: f64,
    /// The allocator's peak in the step, and what stayed reserved after it (the source is the
    /// allocator: over batches of varying lengths, reserved climbs while the peaks vary).
    peak_allocated_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    /// The step's sequence length (its batch's, with padded or bucketed batches).
    seq: usize,
    step: usize,
}

pub(super) fn train(steps: usize, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    let gpu = open_gpu(&r)?;
    let mut trainer = make_trainer(&r, r.plan(), gpu.as_ref())?;
    let bar = if r.json { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(steps as u64) };
    // A hidden bar (JSON, or stderr not a terminal) swallows println: print plainly then.
    let say = |bar: &indicatif::ProgressBar, line: String| {
        if bar.is_hidden() { println!("{line}") } else { bar.println(line) }
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if !r.json {
        say(
            &bar,
            format!(
                "training on {} — {} parameters, batch {}×{} ({})",
                trainer.backend_name(),
                r.model().num_parameters(),
                r.batch_shape().batch,
                r.shape().seq,
                r.techniques().describe()
            ),
        );
    }
    let start = Instant::now();
    let mut stdout = std::io::stdout().lock();
    for step in 0..steps {
        let batch = r.batch(&dataset, step as u64)?;
        // A batch of documents brings its own length: the run goes on at it.
        if batch.shape.seq != trainer.plan().shape.seq {
            trainer
                .reshape(r.at_seq(batch.shape.seq)?.plan())
                .map_err(|e| after_others(e, trainer.plan(), &r, step))?;
        }
        let loss = trainer.train_step(&batch).map_err(|e| after_others(e, trainer.plan(), &r, step))?;
        let elapsed = start.elapsed().as_secs_f64();
        if r.json {
            let m = trainer.memory();
            let line = TrainLine {
                elapsed_secs: elapsed,
                loss: f64::from(loss),
                peak_allocated_bytes: m.map(|m| m.peak_allocated_bytes()),
                reserved_bytes: m.map(|m| m.stats.reserved_bytes),
                seq: trainer.plan().shape.seq,
                step: step + 1,
            };
            let doc =
                serde_json::to_string(&line).map_err(|e| Failure { code: EXIT_FAILURE, message: e.to_string() })?;
            let _ = writeln!(stdout, "{doc}");
        } else {
            say(&bar, format!("step {:>5}  loss {loss:.4}  ({elapsed:.2} s)", step + 1));
            bar.set_message(format!("loss {loss:.4}"));
            bar.inc(1);
        }
        if !loss.is_finite() {
            return Err(Failure {
                code: EXIT_FAILURE,
                message: system_catalog()
                    .format_text("cli-err-loss", &[("loss", loss.to_string()), ("step", (step + 1).to_string())]),
            });
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// A step's error; an out-of-memory error of a batch that an empty GPU of this budget would hold
/// says so: the batches of other lengths before it left the memory fragmented.
fn after_others(e: BackendError, plan: &Plan, r: &Resolved, step: usize) -> Failure {
    let mut failure = Failure::from(e);
    if step > 0
        && failure.code == EXIT_OOM
        && let Ok(alone) = oomlab::memory::simulate_peak(plan, r.budget())
    {
        let args = [
            ("step", (step + 1).to_string()),
            ("length", plan.shape.seq.to_string()),
            ("reserved", oomlab::units::format_bytes(alone.peak_reserved_bytes())),
        ];
        failure.message.push(' ');
        failure.message.push_str(&system_catalog().format_text("cli-err-fragmented", &args));
    }
    failure
}

pub(super) fn dump_step(out: &std::path::Path, config: &ConfigArgs) -> Result<(), Failure> {
    let dataset = Dataset::builtin();
    let r = config.resolve_one(&dataset)?;
    if r.techniques().lora.is_some() {
        return Err(FlagError::DumpWithLora.into());
    }
    let plan = r.plan();
    let layout = plan.layout.clone();
    let gpu = open_gpu(&r)?;
    let mut trainer = make_trainer(&r, plan, gpu.as_ref())?;
    let initial = trainer.read_params()?;
    let batch = r.batch(&dataset, 0)?;
    let loss = trainer.compute_grads(&batch)?;
    let grads = trainer.read_grads()?;
    let dump = StepDump {
        model: r.model(),
        layout: &layout,
        initial_params: &initial,
        grads: &grads,
        batch: &batch,
        loss,
        backend: trainer.backend_name(),
    };
    dump.write(out).map_err(|e| Failure { code: EXIT_FAILURE, message: e.to_string() })?;
    if r.json {
        println!("{}", serde_json::json!({"out": out.display().to_string(), "loss": loss}));
    } else {
        println!("wrote {} (loss {loss:.6})", out.display());
    }
    Ok(())
}
