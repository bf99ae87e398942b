//! `image build` and `POST /v1/images/build`: one of our images built.

use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::Error;
use crate::face::cli::{ImageBuildArgs, ImageWhich};
use crate::images::workbench::{self, Stage};
use crate::ops::image::BuildRequest;

impl From<ImageBuildArgs> for BuildRequest {
    fn from(a: ImageBuildArgs) -> BuildRequest {
        BuildRequest {
            stages: match a.which {
                ImageWhich::Workbench => vec![Stage::Workbench],
                ImageWhich::Desktop => vec![Stage::Desktop],
                ImageWhich::All => Stage::ALL.to_vec(),
            },
            wait: a.wait,
            containerfile: a.containerfile,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildBody {
    /// "workbench" or "desktop", or one of our images' names.
    pub image: String,
}

/// The body, and the config's `images_repo` (which names our images):
/// started in the background, with the embedded Containerfile.
impl TryFrom<(BuildBody, &str)> for BuildRequest {
    type Error = Error;

    fn try_from((body, repo): (BuildBody, &str)) -> Result<BuildRequest, Error> {
        let stage = Stage::parse(&body.image)
            .or_else(|| workbench::stage_of(repo, &body.image))
            .ok_or_else(|| {
                Error::input(crate::error::InputProblem::NotOurImage {
                    image: body.image.clone(),
                    workbench: workbench::image_name(repo, Stage::Workbench),
                    desktop: workbench::image_name(repo, Stage::Desktop),
                })
            })?;
        Ok(BuildRequest {
            stages: vec![stage],
            wait: false,
            containerfile: None,
        })
    }
}
