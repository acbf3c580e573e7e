//! XXH3-64 and XXH32 (seed 0) for the gateway, as a WebAssembly module with no imports.
//!
//! The gateway seals an Iggy SEND_MESSAGES batch in one call (`seal_batch`): every frame's
//! XXH3-64 and the batch's XXH3-64 over its header and the frame sums, where a general
//! hashing library costs a JavaScript-to-WebAssembly round trip (and a copy, and an
//! allocated digest) per frame. The hashing itself is the `xxhash-rust` crate.
#![no_std]

use core::arch::wasm32;
use xxhash_rust::xxh3::{xxh3_64, Xxh3Default};
use xxhash_rust::xxh32::xxh32;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    wasm32::unreachable()
}

unsafe extern "C" {
    static __heap_base: u8;
}

const PAGE: usize = 65536;
const BATCH_HEADER: usize = 256;
const FRAME_HEADER: usize = 48;

fn base() -> usize {
    (&raw const __heap_base) as usize
}

/// The start of a scratch area of at least `len` bytes (memory grows as needed; the
/// caller re-reads `memory.buffer` after a call that may have grown it).
#[unsafe(no_mangle)]
pub extern "C" fn scratch(len: u32) -> u32 {
    let need = base() + len as usize;
    let have = wasm32::memory_size(0) * PAGE;
    if need > have {
        let pages = (need - have).div_ceil(PAGE);
        if wasm32::memory_grow(0, pages) == usize::MAX {
            return 0;
        }
    }
    base() as u32
}

fn bytes(ptr: u32, len: u32) -> &'static mut [u8] {
    unsafe { core::slice::from_raw_parts_mut(ptr as *mut u8, len as usize) }
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

/// Seals a batch in place: `len` bytes at `ptr` are the 256-byte batch header and then
/// `count` frames (48-byte header, payload, user headers). Each frame's checksum (its first
/// 8 bytes) becomes XXH3-64 of the rest of the frame; the batch checksum (bytes 40..48)
/// becomes XXH3-64 of bytes 0..40, bytes 48..52 and the frame checksums in order. Returns 0,
/// or 1 + the index of the first frame that overruns `len` (then nothing is sealed).
#[unsafe(no_mangle)]
pub extern "C" fn seal_batch(ptr: u32, len: u32, count: u32) -> u32 {
    let b = bytes(ptr, len);
    // First pass: every frame fits, so a bad batch is refused whole.
    let mut at = BATCH_HEADER;
    for i in 0..count {
        if at + FRAME_HEADER > b.len() {
            return i + 1;
        }
        let end = at + FRAME_HEADER + u32_at(b, at + 36) + u32_at(b, at + 32);
        if end > b.len() {
            return i + 1;
        }
        at = end;
    }
    let mut sealed = [0u8; 44];
    sealed[..40].copy_from_slice(&b[..40]);
    sealed[40..].copy_from_slice(&b[48..52]);
    let mut batch = Xxh3Default::new();
    batch.update(&sealed);
    let mut at = BATCH_HEADER;
    for _ in 0..count {
        let end = at + FRAME_HEADER + u32_at(b, at + 36) + u32_at(b, at + 32);
        let sum = xxh3_64(&b[at + 8..end]).to_le_bytes();
        b[at..at + 8].copy_from_slice(&sum);
        batch.update(&sum);
        at = end;
    }
    b[40..48].copy_from_slice(&batch.digest().to_le_bytes());
    0
}

/// XXH3-64 of `len` bytes at `ptr`, written little-endian at `out`.
#[unsafe(no_mangle)]
pub extern "C" fn hash64(ptr: u32, len: u32, out: u32) {
    let sum = xxh3_64(bytes(ptr, len)).to_le_bytes();
    bytes(out, 8).copy_from_slice(&sum);
}

/// XXH32 (seed 0) of `len` bytes at `ptr`.
#[unsafe(no_mangle)]
pub extern "C" fn hash32(ptr: u32, len: u32) -> u32 {
    xxh32(bytes(ptr, len), 0)
}
