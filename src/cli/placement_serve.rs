//! `kubeplace placement serve`: Placement's REST API over manifests loaded into memory.

use super::Exit;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::placement_api::{self, PlacementApi};
use crate::serving::http::Lifecycle;

/// Arguments of `kubeplace placement serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Files, folders or `-` with ResourceProvider, Allocation (and ProviderConfig) objects to
    /// start from; none for an empty cloud.
    #[arg(short = 'f', long = "filename", num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Address to listen on (plain HTTP); port 0 picks a free port. Loopback by default:
    /// the static token is no protection on a shared network.
    #[arg(long, default_value = "127.0.0.1:8778")]
    pub listen: SocketAddr,
    /// The `X-Auth-Token` every request but `GET /` must carry (Placement's noauth2 takes
    /// `admin`).
    #[arg(long, default_value = "admin", env = "KUBEPLACE_PLACEMENT_TOKEN")]
    pub token: String,
}

/// Runs the server until SIGINT or SIGTERM. Prints `listening on http://ADDR` on standard
/// output once it accepts connections, so scripts and tests can learn a picked port.
pub fn main(args: &ServeArgs) -> Exit {
    let store = match super::placement::load_state(&args.files, &mut std::io::stdin().lock()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kubeplace placement serve: {e}");
            return Exit::BadInput;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kubeplace placement serve: cannot start the runtime: {e}");
            return Exit::Failed;
        }
    };
    let providers = store.index().len();
    let api = Arc::new(PlacementApi::new(store, args.token.clone()));
    runtime.block_on(async move {
        let (listener, bound) = match placement_api::bind(args.listen).await {
            Ok(b) => b,
            Err(e) => {
                eprintln!(
                    "kubeplace placement serve: cannot listen on {}: {e}",
                    args.listen
                );
                return Exit::Failed;
            }
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "kubeplace placement serve: {providers} providers; listening on http://{bound}"
        );
        let _ = out.flush();
        drop(out);
        let cancel = CancellationToken::new();
        let server = tokio::spawn(placement_api::serve(
            api,
            listener,
            None,
            Lifecycle::stop_at(cancel.clone()),
        ));
        let _ = crate::operator::shutdown::signal().await;
        cancel.cancel();
        let _ = server.await;
        Exit::Ok
    })
}
