#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::hf_tokenizer_json(data));
