//! The writer channel's slot size.

use super::{DecisionRecord, Msg, OutcomeRecord};
use std::mem::size_of;

#[test]
fn a_channel_slot_is_a_pointer_not_a_record() {
    let (slot, record) = (size_of::<Msg>(), size_of::<DecisionRecord>());
    assert!(
        slot <= size_of::<OutcomeRecord>() + 8,
        "{slot} bytes per slot"
    );
    assert!(record > 2 * slot, "{record} bytes per record");
}
