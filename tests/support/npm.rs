//! The Node packages some tests drive, installed by `hack/npm-deps.sh` (pinned in
//! `hack/npm/package-lock.json`, cached under ~/.cache/kubeplace).

use std::path::PathBuf;
use std::process::Command;

/// The `node_modules` directory of `hack/npm/`, installed when it is not yet.
pub fn node_modules() -> PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(format!("{root}/hack/npm-deps.sh"))
        .output()
        .expect("hack/npm-deps.sh runs");
    assert!(
        out.status.success(),
        "hack/npm-deps.sh could not install the Node packages (node and npm with access to the npm registry are needed): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}
