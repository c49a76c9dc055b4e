//! The caching allocator against PyTorch's published rules, random sequences, fragmentation.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use oomlab::memory::allocator::{AllocatorConfig, CachingAllocator, Event, LARGE_BUFFER, Pool, SMALL_BUFFER};
use oomlab::model::init::Rng;

const MIB: u64 = 1 << 20;

fn single_block(bytes: u64) -> (u64, u64, Pool) {
    let mut a = CachingAllocator::new(1 << 30);
    let p = a.malloc(bytes, ()).expect("fits");
    let seg = a.segments().next().expect("one segment");
    a.check_invariants().expect("invariants");
    (p.size, seg.size, seg.pool)
}

#[test]
fn pytorch_sizing_vectors() {
    assert_eq!(single_block(1), (512, SMALL_BUFFER, Pool::Small), "1 B → 512 B block in a 2 MiB small segment");
    assert_eq!(single_block(1_048_577), (1_049_088, LARGE_BUFFER, Pool::Large));
    assert_eq!(single_block(10_485_761), (10_486_272, 12_582_912, Pool::Large));
    // a 20 MiB free block serving 19 MiB + 512 B is not split (remainder 1 MiB − 512 B ≤ 1 MiB)
    let mut a = CachingAllocator::new(1 << 30);
    let p = a.malloc(20 * MIB, ()).expect("fits");
    assert_eq!(a.segments().next().map(|s| s.size), Some(20 * MIB));
    a.free(p);
    let q = a.malloc(19 * MIB + 512, ()).expect("fits");
    assert_eq!(q.size, 20 * MIB, "not split");
    assert_eq!(a.stats().segments, 1, "served from the cached segment");
    a.check_invariants().expect("invariants");
}

#[test]
fn small_blocks_split_and_merge_back() {
    let mut a = CachingAllocator::new(64 * MIB);
    let x = a.malloc(1000, "x").expect("fits");
    let y = a.malloc(3000, "y").expect("fits");
    assert_eq!((x.size, y.size), (1024, 3072));
    assert_eq!((x.offset, y.offset), (0, 1024));
    assert_eq!(x.segment, y.segment);
    a.free(x);
    a.free(y);
    a.check_invariants().expect("invariants");
    let s = a.stats();
    assert_eq!((s.allocated_bytes, s.reserved_bytes), (0, SMALL_BUFFER), "freed memory stays reserved");
    assert_eq!(a.largest_free_block(), SMALL_BUFFER, "neighbours merged into one block");
}

#[test]
fn random_sequences_keep_every_invariant() {
    for seed in 0..8u64 {
        random_sequence(seed, AllocatorConfig::default());
    }
}

#[test]
fn random_sequences_keep_every_invariant_with_each_option() {
    for (i, conf) in [
        "expandable_segments:True",
        "max_split_size_mb:21",
        "garbage_collection_threshold:0.5",
        "max_split_size_mb:24,garbage_collection_threshold:0.7",
    ]
    .iter()
    .enumerate()
    {
        let config = AllocatorConfig::parse(conf).expect("valid");
        for seed in 0..3u64 {
            random_sequence(seed * 4 + i as u64, config);
        }
    }
}

fn random_sequence(seed: u64, config: AllocatorConfig) {
    random_sequence_on(seed, config, 1)
}

/// Requests on `streams` streams (0 to streams − 1).
fn random_sequence_on(seed: u64, config: AllocatorConfig, streams: usize) {
    {
        let capacity = [48, 64, 100, 256][seed as usize % 4] * MIB;
        let mut a = CachingAllocator::new(capacity).with_config(config);
        let mut rng = Rng::new(seed);
        let mut live: Vec<oomlab::memory::Placement> = Vec::new();
        let mut ooms = 0;
        for step in 0..3000 {
            if live.is_empty() || rng.uniform() < 0.55 {
                // mostly small, sometimes large, sometimes huge requests
                let bytes = match rng.below(10) {
                    0..=5 => 1 + rng.below(64 * 1024) as u64,
                    6..=8 => 1 + rng.below(8 << 20) as u64,
                    _ => 1 + rng.below(40 << 20) as u64,
                };
                let stream = rng.below(streams) as u64;
                match a.malloc_on(stream, bytes, step) {
                    Ok(p) => {
                        assert!(p.size >= bytes);
                        live.push(p);
                    }
                    Err(oom) => {
                        ooms += 1;
                        assert!(oom.message("test").contains("Tried to allocate"));
                    }
                }
            } else {
                let i = rng.below(live.len());
                assert!(a.free(live.swap_remove(i)));
            }
            if step % 50 == 0 {
                a.check_invariants().unwrap_or_else(|e| panic!("{config:?} seed {seed} step {step}: {e}"));
                // no two live blocks overlap
                let mut spans: Vec<_> = live.iter().map(|p| (p.segment, p.offset, p.offset + p.size)).collect();
                spans.sort();
                for w in spans.windows(2) {
                    assert!(w[0].0 != w[1].0 || w[0].2 <= w[1].1, "overlap {w:?}");
                }
            }
        }
        for p in live.drain(..) {
            assert!(a.free(p));
        }
        a.check_invariants().expect("invariants");
        assert_eq!(a.stats().allocated_bytes, 0, "freeing everything returns allocated to 0");
        assert_eq!(a.stats().requested_bytes, 0);
        assert!(!a.free(oomlab::memory::Placement { segment: oomlab::memory::SegmentId(999), offset: 0, size: 512 }));
        println!("seed {seed}: {ooms} OOMs, peak reserved {} MiB", a.stats().peak_reserved_bytes / MIB);
    }
}

#[test]
fn random_sequences_on_several_streams_keep_every_invariant() {
    for seed in 1..=4 {
        random_sequence_on(seed, AllocatorConfig::default(), 3);
    }
    let expandable = AllocatorConfig { expandable_segments: true, ..AllocatorConfig::default() };
    random_sequence_on(5, expandable, 3);
}

/// PyTorch keys its free blocks by stream: a block freed on one stream never serves another
/// stream's request, and a segment belongs to the stream whose request made it.
#[test]
fn each_stream_has_its_own_blocks() {
    let mut a = CachingAllocator::new(1 << 30);
    let p = a.malloc_on(0, 4 * MIB, ()).expect("fits");
    a.free(p);
    let q = a.malloc_on(7, 4 * MIB, ()).expect("fits");
    assert_ne!(q.segment, p.segment, "stream 7 does not take stream 0's cached block");
    assert_eq!(a.stats().segments, 2);
    let streams: Vec<u64> = a.segments().map(|s| s.stream).collect();
    assert_eq!(streams, [0, 7]);
    // Back on stream 0, its own cached block serves it.
    let r = a.malloc(4 * MIB, ()).expect("fits");
    assert_eq!(r.segment, p.segment);
    a.free(q);
    a.free(r);
    assert_eq!(a.empty_cache(), 2 * LARGE_BUFFER, "empty_cache releases every stream's cached segments");
    a.check_invariants().expect("invariants");
}

/// A replay's starting point: segments as they were, their live blocks in place (cut where they
/// would overlap), the rest free and usable.
#[test]
fn restored_segments_hold_their_blocks() {
    let mut a = CachingAllocator::new(1 << 30);
    let blocks = vec![(0, 4 * MIB, 4 * MIB - 100, 'a'), (6 * MIB, 2 * MIB, 2 * MIB, 'b'), (7 * MIB, MIB, MIB, 'c')];
    let (id, placed) = a.restore(0, Pool::Large, LARGE_BUFFER, false, blocks);
    assert_eq!(placed.len(), 3);
    assert_eq!(placed[0].map(|p| (p.segment, p.offset, p.size)), Some((id, 0, 4 * MIB)));
    assert_eq!(placed[1].map(|p| p.offset), Some(6 * MIB));
    assert_eq!(placed[2], None, "overlaps the block before it");
    let s = a.stats();
    assert_eq!((s.reserved_bytes, s.allocated_bytes, s.segments), (LARGE_BUFFER, 6 * MIB, 1));
    assert_eq!(s.segment_allocs, 0, "restored, not reserved now");
    a.check_invariants().expect("invariants");
    // The gap between them serves a request; the end serves a larger one.
    let p = a.malloc(2 * MIB, 'd').expect("fits");
    assert_eq!((p.segment, p.offset), (id, 4 * MIB));
    let q = a.malloc(11 * MIB, 'e').expect("fits");
    assert_eq!((q.segment, q.offset), (id, 8 * MIB), "the free end");
    assert!(a.free(placed[0].expect("placed")));
    a.check_invariants().expect("invariants");
}

#[test]
fn fragmentation_causes_oom_although_enough_memory_is_free() {
    // 60 MiB: three 20 MiB large segments. Fill them with 2 MiB blocks, free every other one:
    // 30 MiB is free, but no free block is larger than 2 MiB, so 4 MiB cannot be placed.
    let mut a = CachingAllocator::new(60 * MIB);
    let blocks: Vec<_> = (0..30).map(|i| a.malloc(2 * MIB, i).expect("fits")).collect();
    assert_eq!(a.stats().reserved_bytes, 60 * MIB);
    for p in blocks.iter().step_by(2) {
        a.free(*p);
    }
    let s = a.stats();
    assert_eq!(s.reserved_bytes - s.allocated_bytes, 30 * MIB);
    let err = a.malloc(4 * MIB, 99).expect_err("fragmented");
    assert_eq!(err.largest_free_block, 2 * MIB);
    let msg = err.message("activations h.0.mlp.c_fc.out for op h.0.mlp.c_fc");
    println!("{msg}");
    assert!(msg.starts_with("GPU out of memory. Tried to allocate 20.00 MiB"), "{msg}");
    assert!(msg.contains("GPU 0 has a total capacity of 60.00 MiB of which 0 bytes is free"), "{msg}");
    assert!(
        msg.contains("30.00 MiB is allocated by oomlab, and 30.00 MiB is reserved by oomlab but unallocated"),
        "{msg}"
    );
    assert!(msg.contains("fragmented"), "{msg}");
    a.check_invariants().expect("invariants");
}

#[test]
fn cached_segments_are_released_before_oom() {
    // A cached 20 MiB segment stands in the way of a 40 MiB request in 50 MiB: released, retried.
    let mut a = CachingAllocator::new(50 * MIB);
    let p = a.malloc(5 * MIB, "a").expect("fits");
    a.free(p);
    assert_eq!(a.stats().reserved_bytes, 20 * MIB);
    let q = a.malloc(40 * MIB, "b").expect("fits after releasing the cache");
    assert_eq!(q.size, 40 * MIB);
    assert_eq!(a.stats().segment_releases, 1);
    a.check_invariants().expect("invariants");
}

/// Three 20 MiB segments, each holding three 6 MiB blocks; the third block of the first and the
/// first of the second freed: 12 MiB lie free side by side in memory, but across a segment's
/// edge. Returns the allocator and the 12 MiB request's result.
fn across_an_edge(
    config: AllocatorConfig,
) -> (CachingAllocator<u32>, Result<oomlab::memory::Placement, oomlab::memory::OutOfMemory>) {
    let mut a = CachingAllocator::new(60 * MIB).with_config(config);
    let blocks: Vec<_> = (0..9).map(|i| a.malloc(6 * MIB, i).expect("fits")).collect();
    assert_eq!(a.stats().reserved_bytes, 60 * MIB);
    a.free(blocks[2]);
    a.free(blocks[3]);
    let got = a.malloc(12 * MIB, 99);
    a.check_invariants().expect("invariants");
    (a, got)
}

#[test]
fn expandable_segments_prevent_a_fragmentation_oom() {
    // Without the option: 18 MiB free in all, no block of 12 MiB, and an OOM that says so.
    let (a, got) = across_an_edge(AllocatorConfig::default());
    let oom = got.expect_err("fragmented");
    assert_eq!(oom.cached_free_bytes, 18 * MIB);
    assert_eq!(oom.largest_free_block, 8 * MIB);
    let msg = oom.message("a 12 MiB tensor");
    assert!(msg.contains("fragmented") && msg.contains("expandable_segments:True"), "{msg}");
    assert_eq!(a.stats().segments, 3);
    // With it: one segment of three 20 MiB pages, the two blocks side by side, merged on free.
    let (a, got) = across_an_edge(AllocatorConfig::parse("expandable_segments:True").expect("valid"));
    let p = got.expect("the freed 12 MiB are contiguous");
    assert_eq!((p.offset, p.size), (12 * MIB, 12 * MIB));
    assert_eq!((a.stats().segments, a.stats().reserved_bytes), (1, 60 * MIB));
    let seg = a.segments().next().expect("one segment");
    assert!(seg.expandable);
    // It grew a page at a time, each growth an event of its own.
    let maps: Vec<(u64, u64)> = a
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::SegmentMap { offset, size, .. } => Some((*offset, *size)),
            _ => None,
        })
        .collect();
    assert_eq!(maps, [(20 * MIB, 20 * MIB), (40 * MIB, 20 * MIB)]);
}

#[test]
fn an_expandable_segment_gives_back_its_free_end() {
    let mut a =
        CachingAllocator::new(1 << 30).with_config(AllocatorConfig::parse("expandable_segments:True").expect("valid"));
    let blocks: Vec<_> = (0..4).map(|i| a.malloc(6 * MIB, i).expect("fits")).collect();
    assert_eq!(a.stats().reserved_bytes, 40 * MIB, "24 MiB in pages of 20 MiB");
    a.free(blocks[2]);
    a.free(blocks[3]);
    assert_eq!(a.stats().reserved_bytes, 40 * MIB, "freed memory stays mapped until empty_cache");
    assert_eq!(a.empty_cache(), 20 * MIB, "the whole free page at the end is unmapped");
    assert_eq!(a.stats().reserved_bytes, 20 * MIB);
    assert!(
        matches!(a.events().last(), Some(Event::SegmentUnmap { offset, size, .. }) if (*offset, *size) == (20 * MIB, 20 * MIB))
    );
    a.check_invariants().expect("invariants");
    a.free(blocks[0]);
    a.free(blocks[1]);
    assert_eq!(a.empty_cache(), 20 * MIB);
    assert_eq!((a.stats().reserved_bytes, a.stats().segments), (0, 0), "nothing mapped: the segment is gone");
    a.check_invariants().expect("invariants");
    // Small requests grow their own pool's segment, in 2 MiB pages.
    let s = a.malloc(3000, 7).expect("fits");
    assert_eq!(a.stats().reserved_bytes, SMALL_BUFFER);
    assert_eq!(a.segments().find(|g| g.id == s.segment).map(|g| (g.pool, g.expandable)), Some((Pool::Small, true)));
}

#[test]
fn expandable_segments_with_max_split_size_map_nothing_they_do_not_need() {
    // The free end of the large pool's segment is oversize (≥ 21 MiB): a small request may not
    // take it as a cached block, and takes it as the segment's end instead, mapping no page.
    let conf = AllocatorConfig::parse("expandable_segments:True,max_split_size_mb:21").expect("valid");
    let mut a = CachingAllocator::new(1 << 30).with_config(conf);
    let big = a.malloc(50 * MIB, 0).expect("fits");
    let small = a.malloc(2 * MIB, 1).expect("fits");
    a.free(big);
    let maps = |a: &CachingAllocator<i32>| a.events().iter().filter(|e| matches!(e, Event::SegmentMap { .. })).count();
    let before = (a.stats().reserved_bytes, maps(&a));
    let again = a.malloc(3 * MIB, 2).expect("fits");
    assert_eq!((a.stats().reserved_bytes, maps(&a)), before, "no page mapped for what is already there");
    assert!(again.segment == small.segment);
    a.check_invariants().expect("invariants");
}

#[test]
fn max_split_size_keeps_oversize_blocks_whole() {
    let split = AllocatorConfig::parse("max_split_size_mb:32").expect("valid");
    // A small request does not take a cached oversize block (without the option it splits it).
    for (config, reserved) in [(AllocatorConfig::default(), 40 * MIB), (split, 60 * MIB)] {
        let mut a = CachingAllocator::new(1 << 30).with_config(config);
        let big = a.malloc(40 * MIB, 0).expect("fits");
        a.free(big);
        a.malloc(4 * MIB, 1).expect("fits");
        assert_eq!(a.stats().reserved_bytes, reserved, "{config:?}");
        a.check_invariants().expect("invariants");
    }
    // An oversize request takes an oversize block whole, unsplit...
    let mut a = CachingAllocator::new(1 << 30).with_config(split);
    let big = a.malloc(40 * MIB, 0).expect("fits");
    a.free(big);
    assert_eq!(a.malloc(36 * MIB, 1).expect("fits").size, 40 * MIB, "not split");
    // ...unless the block is 20 MiB or more larger than it: then a segment of its own.
    let mut a = CachingAllocator::new(1 << 30).with_config(split);
    let big = a.malloc(80 * MIB, 0).expect("fits");
    a.free(big);
    assert_eq!(a.malloc(40 * MIB, 1).expect("fits").size, 40 * MIB);
    assert_eq!(a.stats().reserved_bytes, 120 * MIB);
}

#[test]
fn max_split_size_releases_oversize_blocks_before_the_rest() {
    // 110 MiB: three cached-or-held 30 MiB segments and a 20 MiB one for a 5 MiB block.
    // Freed: two of the 30s and the 5 MiB. A 50 MiB request needs 50 MiB released.
    let run = |config: AllocatorConfig| {
        let mut a = CachingAllocator::new(110 * MIB).with_config(config);
        let p: Vec<_> = [30, 30, 30, 5].iter().enumerate().map(|(i, m)| a.malloc(m * MIB, i).expect("fits")).collect();
        for i in [0, 1, 3] {
            a.free(p[i]);
        }
        a.malloc(50 * MIB, 9).expect("fits after a release");
        a.check_invariants().expect("invariants");
        (a.stats().reserved_bytes, a.stats().segment_releases)
    };
    // The option releases the oversize ones, largest first, until 50 MiB: the two 30s.
    assert_eq!(run(AllocatorConfig::parse("max_split_size_mb:21").expect("valid")), (100 * MIB, 2));
    // Without it, every cached segment goes, the small one too.
    assert_eq!(run(AllocatorConfig::default()), (80 * MIB, 3));
    // One cached oversize block large enough is released alone.
    let mut a =
        CachingAllocator::new(100 * MIB).with_config(AllocatorConfig::parse("max_split_size_mb:21").expect("valid"));
    let big = a.malloc(80 * MIB, 0).expect("fits");
    a.free(big);
    a.malloc(40 * MIB, 1).expect("fits");
    assert_eq!((a.stats().reserved_bytes, a.stats().segment_releases), (40 * MIB, 1));
}

#[test]
fn the_garbage_collector_releases_the_oldest_cached_segments_first() {
    let gc = AllocatorConfig::parse("garbage_collection_threshold:0.5").expect("valid");
    let run = |config: AllocatorConfig, capacity: u64| {
        let mut a = CachingAllocator::new(capacity).with_config(config);
        let older = a.malloc(30 * MIB, 0).expect("fits");
        a.free(older);
        let younger = a.malloc(40 * MIB, 1).expect("fits");
        a.free(younger);
        // 70 MiB reserved, past half of 100 MiB: the collector releases the older segment
        // (searched past twice since it was freed, against once), which is enough.
        a.malloc(44 * MIB, 2).expect("fits");
        a.check_invariants().expect("invariants");
        let sizes: Vec<u64> = a.segments().map(|s| s.size / MIB).collect();
        (a.stats().reserved_bytes / MIB, sizes)
    };
    assert_eq!(run(gc, 100 * MIB), (84, vec![40, 44]));
    // Without it, nothing is released until the capacity is reached: then everything cached.
    assert_eq!(run(AllocatorConfig::default(), 100 * MIB), (44, vec![44]));
    assert_eq!(run(AllocatorConfig::default(), 200 * MIB), (114, vec![30, 40, 44]));
    // Without a budget there is no threshold to pass (PyTorch's needs a memory fraction).
    assert_eq!(run(gc, oomlab::plan::MAX_BUDGET_BYTES), (114, vec![30, 40, 44]));
}
