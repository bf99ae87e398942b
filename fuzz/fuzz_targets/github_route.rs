#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| shrooms_agent::fuzzing::github_route(data));
