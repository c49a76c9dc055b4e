//! The root's parts of a streamed pickle: segments, blocks, the trace, the allocator's
//! settings, annotations, each read leniently from the values the parser left.

use super::*;

/// The root's parts, read leniently: a missing key is its default, an unknown key is ignored.
impl Collect {
    fn key(&mut self, s: &str) -> u32 {
        self.strings.intern(s)
    }
    fn num(&mut self, p: &V, key: &str) -> Result<i64, SnapshotError> {
        let k = self.key(key);
        num_of(p.get(k).as_ref(), key)
    }
    fn text(&mut self, p: &V, key: &str) -> String {
        let k = self.key(key);
        match p.get(k) {
            Some(V::Str(s)) => self.strings.get(s).to_string(),
            _ => String::new(),
        }
    }
    fn list(&mut self, p: &V, key: &str) -> Result<Vec<V>, SnapshotError> {
        let k = self.key(key);
        match p.get(k) {
            None | Some(V::None) => Ok(Vec::new()),
            Some(v) => v.items().ok_or_else(|| SnapshotError::Foreign(format!("{key} is not a list"))),
        }
    }

    pub(super) fn dump(mut self, root: &V) -> Result<Dump, SnapshotError> {
        let (mut segments, mut traces, allocator_settings) = match root {
            V::Dict(_) => {
                let mut segments = Vec::new();
                for g in self.list(root, "segments")? {
                    segments.push(self.segment(&g)?);
                }
                let mut traces = Vec::new();
                for trace in self.list(root, "device_traces")? {
                    let entries =
                        trace.items().ok_or_else(|| SnapshotError::Foreign("a device trace is not a list".into()))?;
                    traces.push(self.trace(entries)?);
                }
                let key = self.key("allocator_settings");
                let settings = match root.get(key) {
                    Some(s @ V::Dict(_)) => Some(self.settings(&s)),
                    _ => None,
                };
                self.unknown_keys(root, "snapshot", ROOT_KEYS);
                (segments, traces, settings)
            }
            // Old torch: the segments alone.
            V::List(_) | V::Tuple(_) => {
                let mut segments = Vec::new();
                for g in root.items().unwrap_or_default() {
                    segments.push(self.segment(&g)?);
                }
                (segments, Vec::new(), None)
            }
            _ => {
                return Err(SnapshotError::Foreign(
                    "a pickle of something else (a snapshot is a dict of segments and traces)".into(),
                ));
            }
        };
        let annotations = match root {
            V::Dict(_) => self.annotations(root)?,
            _ => Vec::new(),
        };
        // Each event's metadata by its device and index (the ids are in trace order).
        let mut metadata = Vec::with_capacity(self.metadata.len());
        if !self.metadata.is_empty() {
            let mut at: hashbrown::HashMap<u32, (u32, u32)> = hashbrown::HashMap::new();
            for (d, ids) in self.trace_ids.iter().enumerate() {
                for (i, &id) in ids.iter().enumerate() {
                    at.insert(id, (u32::try_from(d).unwrap_or(u32::MAX), u32::try_from(i).unwrap_or(u32::MAX)));
                }
            }
            for (id, text) in std::mem::take(&mut self.metadata) {
                if let Some(&(device, index)) = at.get(&id) {
                    metadata.push(Metadata { device, index, text });
                }
            }
        }
        // The stacks' ids were provisional if a thread interned them.
        let interned = self.stacks.finish()?;
        if interned.ids.is_some() {
            for e in traces.iter_mut().flatten() {
                e.stack = interned.stack(e.stack);
            }
            for b in segments.iter_mut().flat_map(|g| g.blocks.iter_mut()) {
                b.stack = interned.stack(b.stack);
            }
        }
        let unknown = std::mem::take(&mut self.unknown);
        Ok(Dump {
            segments,
            traces,
            allocator_settings,
            stacks: interned.tables.into_stacks(self.strings),
            annotations,
            metadata,
            unknown,
        })
    }

    /// `allocator_settings`, every key (an unknown one kept as text).
    fn settings(&mut self, s: &V) -> AllocatorSettings {
        let mut out = AllocatorSettings::default();
        let V::Dict(d) = s else { return out };
        for (key, v) in d.items.borrow().iter() {
            let V::Str(key) = key else { continue };
            let name = self.strings.get(*key).to_string();
            match (name.as_str(), v) {
                ("PYTORCH_CUDA_ALLOC_CONF", V::Str(t)) => out.alloc_conf = self.strings.get(*t).to_string(),
                ("max_split_size", v) => out.max_split_size = v.int(),
                ("garbage_collection_threshold", V::Float(f)) => out.garbage_collection_threshold = Some(*f),
                ("garbage_collection_threshold", v) => out.garbage_collection_threshold = v.int().map(|i| i as f64),
                ("expandable_segments", v) => out.expandable_segments = v.bool().unwrap_or(false),
                ("pinned_num_register_threads", v) => out.pinned_num_register_threads = v.int(),
                ("release_lock_on_cudamalloc", v) => out.release_lock_on_cudamalloc = v.bool(),
                ("pinned_use_cuda_host_register", v) => out.pinned_use_cuda_host_register = v.bool(),
                ("graph_capture_record_stream_reuse", v) => out.graph_capture_record_stream_reuse = v.bool(),
                ("roundup_power2_divisions", V::Dict(m)) => {
                    let pairs = m.items.borrow().iter().map(|(k, v)| (self.text_of(k), v.int().unwrap_or(0))).collect();
                    out.roundup_power2_divisions = Some(super::super::Divisions(pairs));
                }
                (_, v) => {
                    let text = self.text_of(v);
                    out.other.push((name, text));
                }
            }
        }
        out
    }

    /// `external_annotations` (each a dict of device, stage, name and time).
    fn annotations(&mut self, root: &V) -> Result<Vec<Annotation>, SnapshotError> {
        let mut out = Vec::new();
        for a in self.list(root, "external_annotations")? {
            if !matches!(a, V::Dict(_)) {
                continue;
            }
            out.push(Annotation {
                device: self.num(&a, "device")?,
                stage: self.text(&a, "stage"),
                name: self.text(&a, "name"),
                time_us: self.num(&a, "time_us")?,
            });
        }
        Ok(out)
    }

    /// Counts the keys of `d` that are not in `known`, under `at`.
    fn unknown_keys(&mut self, d: &V, at: &str, known: &[&str]) {
        let V::Dict(d) = d else { return };
        for (key, _) in d.items.borrow().iter() {
            if let V::Str(key) = key {
                let name = self.strings.get(*key);
                if !known.contains(&name) {
                    self.unknown.key(at, name);
                }
            }
        }
    }

    /// A device trace's events (moved, not copied, when they are the whole of the events read).
    fn trace(&mut self, entries: Vec<V>) -> Result<Vec<Event>, SnapshotError> {
        let mut ids = Vec::with_capacity(entries.len());
        for e in entries {
            let id = match self.settle(e)? {
                V::Event(id) => id,
                d @ V::Dict(_) => match self.settle_as_event(&d)? {
                    V::Event(id) => id,
                    _ => continue,
                },
                _ => return Err(SnapshotError::Foreign("a trace entry is not a dict".into())),
            };
            ids.push(id);
        }
        if !self.metadata.is_empty() {
            self.trace_ids.push(ids.clone());
        } else {
            self.trace_ids.push(Vec::new());
        }
        let whole = ids.len() == self.events.len() && ids.iter().enumerate().all(|(i, &id)| id as usize == i);
        if whole {
            return Ok(std::mem::take(&mut self.events));
        }
        Ok(ids.iter().filter_map(|&id| self.events.get(id as usize).copied()).collect())
    }

    /// A trace entry without an action (kept as an unknown event).
    fn settle_as_event(&mut self, d: &V) -> Result<V, SnapshotError> {
        let V::Dict(d) = d else { return Ok(V::None) };
        let items = d.items.borrow();
        let other = self.key("");
        self.event(&items, other)
    }

    fn segment(&mut self, g: &V) -> Result<DumpSegment, SnapshotError> {
        if !matches!(g, V::Dict(_)) {
            return Err(SnapshotError::Foreign("a segment is not a dict".into()));
        }
        let mut blocks = Vec::new();
        for b in self.list(g, "blocks")? {
            blocks.push(self.block(&b)?);
        }
        let pool = self.list(g, "segment_pool_id")?;
        let pool = [pool.first().and_then(V::int).unwrap_or(0), pool.get(1).and_then(V::int).unwrap_or(0)];
        let expandable = self.key("is_expandable");
        let expandable = g.get(expandable).and_then(|v| v.bool()).unwrap_or(false);
        let small = match self.text(g, "segment_type").as_str() {
            "small" => Some(true),
            "large" => Some(false),
            _ => None,
        };
        self.unknown_keys(g, "segment", SEGMENT_KEYS);
        Ok(DumpSegment {
            device: self.num(g, "device")?,
            address: self.num(g, "address")?,
            total_size: self.num(g, "total_size")?,
            stream: self.num(g, "stream")?,
            blocks,
            pool,
            expandable,
            small,
        })
    }

    fn block(&mut self, b: &V) -> Result<DumpBlock, SnapshotError> {
        let size = self.num(b, "size")?;
        // Old PyTorch: the allocation's history instead of frames (the first entry counts).
        let first = self.list(b, "history")?.into_iter().next();
        let k = self.key("requested_size");
        let requested = match b.get(k) {
            None | Some(V::None) => match &first {
                Some(h) => self.num(h, "real_size")?,
                None => size,
            },
            v => num_of(v.as_ref(), "requested_size")?,
        };
        let mut stack = self.stack_of(b.get(self.k.frames).as_ref())?;
        if stack == 0
            && let Some(h) = &first
        {
            stack = self.stack_of(h.get(self.k.frames).as_ref())?;
        }
        self.unknown_keys(b, "block", BLOCK_KEYS);
        Ok(DumpBlock {
            address: self.num(b, "address")?,
            size,
            requested,
            allocated: self.text(b, "state").starts_with("active"),
            stack,
        })
    }
}
