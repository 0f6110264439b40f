//! The kernel log's OOM kills: each line through `dockerlet_host::oom::parse_record` (lines
//! starting with a space are continuations, skipped as the watcher skips them), the records
//! through one `OomParser`. A parsed record, written back in the kernel's format, parses to
//! itself; an OOM is completed by the record that gave it. The same text read as the watcher's
//! checkpoint file (`Checkpoint::parse`), when it parses, renders to a file that parses to it.
#![no_main]

use dockerlet_host::oom::{parse_record, Checkpoint, OomParser};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(checkpoint) = Checkpoint::parse(&text) {
        assert_eq!(Checkpoint::parse(&checkpoint.render()).as_ref(), Some(&checkpoint));
    }
    let mut parser = OomParser::default();
    for line in text.lines().filter(|l| !l.starts_with(' ')) {
        let record = match parse_record(line) {
            Ok(record) => record,
            Err(e) => {
                drop(e.to_string());
                continue;
            }
        };
        let written = format!(
            "{},{},{},-;{}",
            record.priority, record.sequence, record.timestamp_us, record.message
        );
        assert_eq!(parse_record(&written).as_ref(), Ok(&record), "{written:?}");
        if let Some(oom) = parser.feed(&record) {
            assert!(oom.sequence <= record.sequence || oom.pid.is_none());
            let _ = oom.is_system_oom();
        }
    }
});
