//! `hw_video:` — the guest's video device.

use super::int_min;
use crate::extra_specs::definition::DefinitionSpec as D;

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "hw_video:ram_max_mb",
            "The largest amount of video memory, in MiB, that an image may ask for through hw_video_ram. It does not apply to vGPUs.",
            int_min(0),
        )
        .value_doc("MiB"),
    ]
}
