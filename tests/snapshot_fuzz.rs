//! The snapshot reader against damaged input: every cut of a generated snapshot, and thousands of
//! mutations of it (bytes flipped, runs deleted, duplicated, overwritten with opcodes and huge
//! lengths), read without a panic, each one either a snapshot or an error with a message — and
//! never allocating more than the bytes could justify: this test binary counts every allocation
//! (its own global allocator) and holds each read's peak under 8 MiB + 64 × the input's size.

#[path = "support/pickle_gen.rs"]
mod pickle_gen;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use oomlab::memory::snapshot::read;

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        if new > layout.size() {
            let now = NOW.fetch_add(new - layout.size(), Ordering::Relaxed) + (new - layout.size());
            PEAK.fetch_max(now, Ordering::Relaxed);
        } else {
            NOW.fetch_sub(layout.size() - new, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Reads `bytes`, returning whether it read and the peak bytes allocated while reading.
fn read_counted(bytes: &[u8]) -> (bool, usize) {
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let ok = match read::from_bytes(bytes) {
        Ok(_) => true,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            false
        }
    };
    (ok, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn bound(len: usize) -> usize {
    (8 << 20) + 64 * len
}

/// One test in this binary: nothing else allocates while it counts.
#[test]
fn damaged_snapshots_never_panic_nor_allocate_without_bound() {
    let good = pickle_gen::generate(300, 3).bytes;
    let (ok, _) = read_counted(&good);
    assert!(ok, "the undamaged file reads");
    // Every cut is an error (the file ends mid-value).
    for cut in 0..good.len() {
        let (ok, peak) = read_counted(&good[..cut]);
        assert!(!ok, "a file cut at {cut} of {} read as a snapshot", good.len());
        assert!(peak <= bound(cut), "cut at {cut}: {peak} bytes allocated");
    }
    // Mutations: a xorshift stream, so a failure reproduces.
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Opcodes and lengths that a mutation writes: containers, memo operations, huge lengths.
    let nasty: [&[u8]; 10] = [
        b"]",
        b"}",
        b"(",
        b"e",
        b"u",
        &[b'j', 0xff, 0xff, 0xff, 0x7f],
        &[b'r', 0xff, 0xff, 0xff, 0xff],
        &[b'X', 0xff, 0xff, 0xff, 0xff],
        &[0x8d, 0, 0, 0, 0, 0, 0, 0, 0x40],
        &[0x8b, 0xff, 0xff, 0xff, 0x7f],
    ];
    let mut read_ok = 0;
    for round in 0..3000 {
        let mut b = good.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % b.len().max(1);
            match next() % 5 {
                0 => b[at] ^= 1 << (next() % 8),
                1 => {
                    let n = (next() as usize % 64).min(b.len() - at);
                    b.drain(at..at + n);
                }
                2 => {
                    let n = (next() as usize % 64).min(b.len() - at);
                    let run: Vec<u8> = b[at..at + n].to_vec();
                    b.splice(at..at, run);
                }
                3 => {
                    let n = nasty[(next() % nasty.len() as u64) as usize];
                    b.splice(at..at, n.iter().copied());
                }
                _ => b[at] = next() as u8,
            }
            if b.is_empty() {
                break;
            }
        }
        let (ok, peak) = read_counted(&b);
        read_ok += usize::from(ok);
        assert!(peak <= bound(b.len()), "mutation {round}: {peak} bytes allocated for {} bytes", b.len());
    }
    // Most mutations break the file; some (a flipped digit) still read: both happen.
    assert!(read_ok > 0 && read_ok < 3000, "{read_ok} of 3000 mutations read");
}
