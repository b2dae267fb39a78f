//! A label edit on any block changes only the label area and the check word, and keeps
//! the block's XOR.
#![no_main]

use asmguard_format::kfbh::xor_words;
use asmguard_format::label::{self, Label};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (String, Vec<u8>)| {
    let (name, mut block) = input;
    let Ok(l) = Label::new(&name) else { return };
    let before = block.clone();
    let x = xor_words(&block);
    if label::write(&mut block, &l).is_err() {
        assert!(before.len() < 512);
        assert_eq!(block, before);
        return;
    }
    assert_eq!(xor_words(&block), x);
    for (i, (a, b)) in before.iter().zip(&block).enumerate() {
        if a != b {
            assert!((0x0c..0x10).contains(&i) || (0x20..0x40).contains(&i));
        }
    }
    assert_eq!(label::read(&block).label(), Some(l));
});
