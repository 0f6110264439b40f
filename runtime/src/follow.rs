//! Where a followed log stopped, so that what Docker's follow did not deliver can be read again.
//!
//! Docker 20.10 can end a follow at the container's exit before it has sent the last lines
//! (seen with 100 followers of one container). A follow therefore asks Docker for its
//! timestamps, which prefix every message it sends (`2026-12-04T16:41:09.104038160Z a\n`: a
//! fixed nine-digit RFC 3339 time in UTC, so the texts order as the times do; the parts of a
//! long line share one). The [`FollowMark`] keeps the last timestamp delivered and how many
//! messages carried it; once the follow ends cleanly, the log is read again without follow from
//! that second, and [`FollowMark::after`] passes on only the messages after the mark. This
//! works whatever `tailLines` and `sinceSeconds` chose as the follow's start.
//!
//! Docker 20.10's follow also sends some lines again after it rotates the log file (json-file
//! `max-size`, see `crate::log_config`): `docker logs -f` of a container writing numbered lines
//! into 20 KiB files shows 187..200 after 200, 372..400 after 400, and so on (moby
//! `daemon/logger/loggerutils/logfile.go`, the follower reopening after a rotation). The mark
//! therefore also drops what goes back in time ([`FollowMark::fresh`]), so `kubectl logs -f`
//! shows each line once across rotations.

use bytes::Bytes;

/// A Docker log message with its timestamp prefix: the timestamp, and the message after it.
pub(crate) fn split_timestamp(message: &Bytes) -> Option<(&str, Bytes)> {
    // "2026-12-04T16:41:09.104038160Z " is 31 bytes; a zone offset instead of Z is longer.
    let space = message.iter().take(40).position(|&b| b == b' ')?;
    let stamp = std::str::from_utf8(&message[..space]).ok()?;
    (stamp.len() >= 20 && stamp.as_bytes()[4] == b'-' && stamp.as_bytes()[10] == b'T')
        .then(|| (stamp, message.slice(space + 1..)))
}

/// How far a follow got: its last message's timestamp, and how many of the messages delivered
/// carried that same timestamp.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FollowMark {
    last: Option<String>,
    at_last: usize,
    /// The text of the last message delivered: a lone re-send of it carries the same.
    last_text: Bytes,
    /// While Docker sends again what it sent (a message stamped before `last` came): how many
    /// messages stamped `last` came again since.
    replayed_at_last: Option<usize>,
}

impl FollowMark {
    /// Whether a message the follow received is new, noted as delivered if it is. A message
    /// stamped before the last one delivered is a re-send (the log's order is the times'), and
    /// so are, right after such, as many stamped as the last one as were delivered; so is one
    /// stamped as the last one with its very text. Any other message stamped as the last one is
    /// the next part of a long line (the parts share one timestamp).
    pub(crate) fn fresh(&mut self, stamp: &str, text: &Bytes) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self.last.as_deref().map(|last| stamp.cmp(last)) {
            None | Some(Greater) => {
                self.last = Some(stamp.to_string());
                self.at_last = 1;
                self.last_text = text.clone();
                self.replayed_at_last = None;
                true
            }
            Some(Less) => {
                self.replayed_at_last = Some(0);
                false
            }
            Some(Equal) => {
                if let Some(seen) = self.replayed_at_last.as_mut() {
                    *seen += 1;
                    if *seen <= self.at_last {
                        return false;
                    }
                    self.replayed_at_last = None;
                } else if *text == self.last_text {
                    return false;
                }
                self.at_last += 1;
                self.last_text = text.clone();
                true
            }
        }
    }

    /// The whole second to read the log again from (Docker's `since`), when anything was
    /// delivered.
    pub(crate) fn since(&self) -> Option<i64> {
        let last = self.last.as_deref()?;
        last.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
    }

    /// A reader of the second read: true for each message the follow did not deliver. Messages
    /// come in the log's order, so the ones carrying the mark's timestamp are skipped as many
    /// times as the follow delivered them.
    pub(crate) fn after(self) -> impl FnMut(&str) -> bool {
        let FollowMark {
            last,
            at_last: mut skip,
            ..
        } = self;
        move |stamp| match last.as_deref().map(|last| stamp.cmp(last)) {
            None | Some(std::cmp::Ordering::Greater) => true,
            Some(std::cmp::Ordering::Less) => false,
            Some(std::cmp::Ordering::Equal) if skip > 0 => {
                skip -= 1;
                false
            }
            Some(std::cmp::Ordering::Equal) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &'static str) -> Bytes {
        Bytes::from_static(text.as_bytes())
    }

    #[test]
    fn a_message_splits_into_its_timestamp_and_text() {
        let m = message("2026-12-04T16:41:09.104038160Z a b\n");
        let (stamp, text) = split_timestamp(&m).unwrap();
        assert_eq!(stamp, "2026-12-04T16:41:09.104038160Z");
        assert_eq!(&text[..], b"a b\n");
        assert_eq!(split_timestamp(&message("no timestamp here\n")), None);
        assert_eq!(
            split_timestamp(&message("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")),
            None
        );
        assert_eq!(
            split_timestamp(&message("2026-12-04T16:41:09Z \n")).unwrap().0,
            "2026-12-04T16:41:09Z"
        );
    }

    #[test]
    fn the_second_read_passes_on_only_what_the_follow_missed() {
        let mut mark = FollowMark::default();
        // The follow delivered a, then two parts of a long line b sharing a timestamp, and
        // ended before the third part and before c.
        assert!(mark.fresh("2026-12-04T16:41:09.100000000Z", &message("a\n")));
        assert!(mark.fresh("2026-12-04T16:41:09.200000000Z", &message("b1")));
        assert!(mark.fresh("2026-12-04T16:41:09.200000000Z", &message("b2")));
        assert_eq!(mark.since(), Some(1_796_402_469));
        let mut after = mark.after();
        let second_read = [
            "2026-12-04T16:41:09.000000000Z", // before the follow's start (tailLines)
            "2026-12-04T16:41:09.100000000Z",
            "2026-12-04T16:41:09.200000000Z",
            "2026-12-04T16:41:09.200000000Z",
            "2026-12-04T16:41:09.200000000Z",
            "2026-12-04T16:41:10.000000000Z",
        ];
        let passed: Vec<bool> = second_read.iter().map(|s| after(s)).collect();
        assert_eq!(passed, [false, false, false, false, true, true]);
    }

    /// What Docker sends again after a rotation is dropped: a run going back in time up to and
    /// including the last message, or the last message alone; the next part of a long line
    /// and what follows pass.
    #[test]
    fn a_follow_drops_what_docker_sends_again() {
        let t = |n: u32| format!("2026-12-04T16:41:09.{n:09}Z");
        let line = |n: u32| Bytes::from(format!("line-{n}\n"));
        let mut mark = FollowMark::default();
        let mut passed = Vec::new();
        let mut send = |n: u32, text: Bytes| {
            if mark.fresh(&t(n), &text) {
                passed.push(String::from_utf8_lossy(&text).trim().to_string());
            }
        };
        for n in 1..=5 {
            send(n, line(n));
        }
        // A rotation: 3, 4, 5 again, then 6.
        for n in 3..=6 {
            send(n, line(n));
        }
        // The last one alone again, then the next.
        send(6, line(6));
        send(7, line(7));
        // A long line in two parts sharing one time, its first part sent again with the time
        // before it, then the rest.
        send(8, Bytes::from_static(b"long-a"));
        send(8, Bytes::from_static(b"long-b\n"));
        send(7, line(7));
        send(8, Bytes::from_static(b"long-a"));
        send(8, Bytes::from_static(b"long-b\n"));
        send(9, line(9));
        let expected = [
            "line-1", "line-2", "line-3", "line-4", "line-5", "line-6", "line-7", "long-a", "long-b", "line-9",
        ];
        assert_eq!(passed, expected);
    }

    #[test]
    fn a_follow_that_delivered_nothing_reads_everything_again() {
        let mark = FollowMark::default();
        assert_eq!(mark.since(), None);
        assert!(mark.after()("2026-12-04T16:41:09.100000000Z"));
    }
}
