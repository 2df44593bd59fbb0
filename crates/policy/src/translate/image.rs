//! Images: the traits an image requires of the hosts it boots on.

use kubeplace_api::{Flavor, Image};
use kubeplace_core::placement::request::{Request, TraitConflict};

use super::flavor::flavor_request_with_image;

/// The traits an image requires: `trait:NAME=required` properties, sorted.
pub fn required_traits(image: &Image) -> Vec<String> {
    image
        .spec
        .properties
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("trait:")
                .filter(|_| v == "required")
                .map(str::to_string)
        })
        .collect()
}

/// The request to place a server of `flavor` booted from `image`: the flavor's groups, the
/// image's required traits in the unnumbered group, and (when the image names its disk
/// format) its image-type support trait required of the host's root provider.
pub fn server_request(flavor: &Flavor, image: &Image) -> Result<Request, TraitConflict> {
    let mut request = flavor_request_with_image(flavor, &image.spec.properties)
        .with_image_traits(&required_traits(image))?;
    if let Some(format) = image.spec.disk_format {
        request.root_required.insert(format.support_trait());
    }
    Ok(request)
}
