//! Any bytes: the validator and repair must not panic, and repair's output must validate.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (_, _) = jets_read::validate::validate_bytes(data);
    if let Ok(mut reader) =
        jets_read::Reader::from_read(std::io::Cursor::new(data.to_vec()), "fuzz")
    {
        let mut out = Vec::new();
        if jets_read::validate::repair(&mut reader, &mut out, Default::default()).is_ok() {
            let (diagnostics, report) = jets_read::validate::validate_bytes(&out);
            assert_eq!(report.errors, 0, "{diagnostics:?}");
        }
    }
});
