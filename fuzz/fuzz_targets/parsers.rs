//! Every parser of the format crate on arbitrary bytes: none may panic, and what a
//! parser accepts must be self-consistent.
#![no_main]

use asmguard_format::alloc::{AtBlock, FstBlock};
use asmguard_format::kfbh::{self, Checksum};
use asmguard_format::{label, probe, DiskHeader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.len() / 2;
    let (head, tail) = data.split_at(split);
    let size = u64::from_le_bytes(asmguard_format::bytes::arr(data, 0));
    let _ = probe::probe(data, tail, size);
    let _ = probe::probe(head, tail, data.len() as u64);
    if let Some(h) = DiskHeader::parse(data) {
        // A header whose checksum is valid XORs to zero over its block.
        if h.checksum == Checksum::Valid {
            assert_eq!(kfbh::xor_words(&data[..h.checksum_block_len]), 0);
        }
    }
    for bs in [512usize, 1024, 4096] {
        if let Ok(at) = AtBlock::parse(data, bs) {
            assert!(at.entries.len() <= AtBlock::capacity(bs));
            assert_eq!(at.free_aus().count() + at.entries.iter().filter(|e| e.allocated()).count(), at.entries.len());
        }
        let _ = FstBlock::parse(data, bs);
    }
    let _ = label::read(data);
});
