//! A real Kubernetes control plane for end-to-end tests.
//!
//! [`cluster`] builds (once, cached under `~/.cache/kubeplace` by
//! `hack/build-control-plane.sh`) and starts etcd and kube-apiserver on
//! 127.0.0.1 with free ports, certificates and service-account keys made by
//! openssl, and an admin kubeconfig in a temporary directory. One control
//! plane serves every test of the test binary.
//!
//! Nothing outlives the test run: the processes are killed and the directory
//! removed by an `atexit` handler (libtest's exit, whether tests passed or
//! failed), and a small watchdog process kills them when the test process dies
//! any other way (a signal, an abort), because its stdin — a pipe from the test
//! process — then reaches end of file.

#![allow(dead_code)]

pub mod nova;
pub mod osc;

use std::ffi::c_int;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, Once, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// The repository root.
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// What `cluster()` waits for at most before giving up on `/readyz`.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------
// The binaries

static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The directory with kube-apiserver, etcd, kubectl and helm, built by
/// `hack/build-control-plane.sh` when they are missing (a cold build takes
/// 10–30 minutes; later runs find them in the cache at once).
pub fn bin_dir() -> &'static Path {
    match BIN.get_or_init(build_binaries) {
        Ok(dir) => dir,
        Err(e) => panic!("{e}"),
    }
}

fn build_binaries() -> Result<PathBuf, String> {
    let start = Instant::now();
    let script = format!("{ROOT}/hack/build-control-plane.sh");
    let out = Command::new(&script)
        .current_dir(ROOT)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{script} failed ({})", out.status));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    for b in ["etcd", "kube-apiserver", "kubectl", "helm"] {
        if !dir.join(b).is_file() {
            return Err(format!("{script} printed {dir:?}, which has no {b}"));
        }
    }
    eprintln!(
        "control plane binaries in {} ({:.1?})",
        dir.display(),
        start.elapsed()
    );
    Ok(dir)
}

// ---------------------------------------------------------------------------
// Cleanup at exit

#[derive(Default)]
struct Reaper {
    /// Started processes, killed in reverse order (apiserver before etcd:
    /// the other way round the apiserver's shutdown waits for etcd).
    children: Vec<Child>,
    /// The watchdogs' stdins (one per control plane); closing them (at exit or death)
    /// wakes the watchdogs.
    watchdog_stdins: Vec<ChildStdin>,
    dirs: Vec<PathBuf>,
}

static REAPER: Mutex<Option<Reaper>> = Mutex::new(None);
static REGISTER_ATEXIT: Once = Once::new();

unsafe extern "C" {
    fn atexit(callback: extern "C" fn()) -> c_int;
}

extern "C" fn reap_at_exit() {
    reap();
}

fn reaper() -> MutexGuard<'static, Option<Reaper>> {
    REGISTER_ATEXIT.call_once(|| {
        // SAFETY: registers a plain function with the C runtime; `reap`
        // never unwinds (it only logs failures).
        let rc = unsafe { atexit(reap_at_exit) };
        assert_eq!(rc, 0, "atexit failed");
    });
    let mut guard = REAPER.lock().unwrap_or_else(|e| e.into_inner());
    guard.get_or_insert_with(Reaper::default);
    guard
}

/// Kills every started process and removes the temporary directories.
fn reap() {
    let Some(mut reaper) = REAPER.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    while let Some(mut child) = reaper.children.pop() {
        let _ = child.kill();
        let _ = child.wait();
    }
    reaper.watchdog_stdins.clear();
    for dir in reaper.dirs.drain(..) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn spawn_registered(mut cmd: Command, what: &str) -> u32 {
    let mut reaper = reaper();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let pid = child.id();
    reaper.as_mut().expect("reaper").children.push(child);
    pid
}

/// The file in the control plane's directory listing the pids the watchdog
/// kills.
const PIDS_FILE: &str = "pids";

fn record_pid(dir: &Path, pid: u32) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(PIDS_FILE))
        .expect("the pids file");
    writeln!(file, "{pid}").expect("record a pid");
}

fn unrecord_pid(dir: &Path, pid: u32) {
    let path = dir.join(PIDS_FILE);
    let kept: String = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.trim() != pid.to_string())
        .map(|l| format!("{l}\n"))
        .collect();
    let _ = std::fs::write(path, kept);
}

/// Starts the watchdog: `sh` waiting on a pipe from this process; at end of
/// file (this process is gone) it kills every pid in `dir/pids` and removes
/// `dir`.
fn start_watchdog(dir: &Path) {
    let mut reaper = reaper();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(
            r#"read -r _ || true; kill -9 $(cat "$1/pids") 2>/dev/null
               sleep 1; rm -rf "$1"; exit 0"#,
        )
        .arg("kubeplace-e2e-watchdog")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start the watchdog");
    let r = reaper.as_mut().expect("reaper");
    r.watchdog_stdins.extend(child.stdin.take());
    r.children.push(child);
}

// ---------------------------------------------------------------------------
// The control plane

/// A running etcd + kube-apiserver and the tools to talk to them.
pub struct ControlPlane {
    pub bin: PathBuf,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub server: String,
    etcd: Server,
    apiserver: Server,
}

/// One of the control plane's servers: how it is started, and the running process.
struct Server {
    name: &'static str,
    args: Vec<String>,
    process: Mutex<Option<Process>>,
}

impl Server {
    fn new(name: &'static str, args: Vec<String>) -> Server {
        Server {
            name,
            args,
            process: Mutex::new(None),
        }
    }

    /// Its pid and exit status when it was started and has exited since. Only this
    /// server is looked at: processes of other tests come and go as they please.
    fn exited(&self) -> Option<String> {
        let pid = self
            .process
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()?
            .pid;
        let mut reaper = reaper();
        let children = &mut reaper.as_mut().expect("reaper").children;
        let child = children.iter_mut().find(|c| c.id() == pid)?;
        match child.try_wait() {
            Ok(Some(status)) => Some(format!("{} (pid {pid}) exited ({status})", self.name)),
            _ => None,
        }
    }

    /// Starts it with its arguments, its output appended to `<dir>/<name>.log`.
    fn launch(&self, bin: &Path, dir: &Path) {
        let log = dir.join(format!("{}.log", self.name));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("a log file");
        let mut cmd = Command::new(bin.join(self.name));
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file);
        let pid = spawn_registered(cmd, self.name);
        record_pid(dir, pid);
        *self.process.lock().unwrap_or_else(|e| e.into_inner()) = Some(Process { pid, log });
    }

    /// Stops it: SIGKILL when `crash`, else SIGTERM with 30 s to exit.
    fn halt(&self, crash: bool) {
        let process = self
            .process
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(p) = process {
            if crash {
                p.kill();
            } else {
                p.stop(Duration::from_secs(30));
            }
        }
    }
}

static CLUSTER: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

/// The shared control plane, started on first use.
pub fn cluster() -> &'static ControlPlane {
    let cp = CLUSTER.get_or_init(|| {
        let bin = bin_dir().to_path_buf();
        std::panic::catch_unwind(|| ControlPlane::start(bin)).map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the control plane did not start".into())
        })
    });
    match cp {
        Ok(cp) => cp,
        Err(e) => panic!("control plane: {e}"),
    }
}

/// Tests that create kubeplace objects hold this for reading; a test that
/// installs cluster-wide admission webhooks (whose backends do not run here)
/// holds it for writing, so the two never overlap.
static WEBHOOKS: RwLock<()> = RwLock::new(());

pub fn objects_lock() -> RwLockReadGuard<'static, ()> {
    WEBHOOKS.read().unwrap_or_else(|e| e.into_inner())
}

pub fn exclusive_lock() -> RwLockWriteGuard<'static, ()> {
    WEBHOOKS.write().unwrap_or_else(|e| e.into_inner())
}

/// Ports handed out by [`free_port`] in this test process.
static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// A port nothing listens on now, and one this test process has not been given before: a
/// port is free only until something binds it, so two ports asked for one after the other
/// (a server's and the next one's) must not be the same number.
pub fn free_port() -> u16 {
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port on 127.0.0.1")
            .port();
        if !handed.contains(&port) {
            handed.push(port);
            return port;
        }
    }
}

fn run_ok(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// How a control plane is set up beyond the defaults.
#[derive(Debug, Clone, Copy, Default)]
struct Options {
    /// kube-apiserver presents a client certificate to every admission webhook (see
    /// [`ControlPlane::private_with_webhook_client_cert`]).
    webhook_client_cert: bool,
}

impl ControlPlane {
    fn start(bin: PathBuf) -> ControlPlane {
        ControlPlane::start_with(bin, Options::default())
    }

    fn start_with(bin: PathBuf, options: Options) -> ControlPlane {
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("kubeplace-e2e.")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        reaper().as_mut().expect("reaper").dirs.push(dir.clone());

        make_certificates(&dir);
        if options.webhook_client_cert {
            make_webhook_client_certificate(&dir);
        }

        let etcd_port = free_port();
        let peer_port = free_port();
        let api_port = free_port();

        let client = format!("http://127.0.0.1:{etcd_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let etcd = Server::new(
            "etcd",
            vec![
                "--name=kubeplace-test".to_string(),
                format!("--data-dir={}", dir.join("etcd-data").display()),
                format!("--listen-client-urls={client}"),
                format!("--advertise-client-urls={client}"),
                format!("--listen-peer-urls={peer}"),
                format!("--initial-advertise-peer-urls={peer}"),
                format!("--initial-cluster=kubeplace-test={peer}"),
                "--unsafe-no-fsync".into(),
                "--log-level=warn".into(),
            ],
        );
        etcd.launch(&bin, &dir);

        let p = |name: &str| dir.join(name).display().to_string();
        let mut apiserver_args = vec![
            format!("--etcd-servers={client}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--authorization-mode=RBAC".into(),
            "--endpoint-reconciler-type=none".into(),
            "--profiling=false".into(),
        ];
        if options.webhook_client_cert {
            apiserver_args.push(format!(
                "--admission-control-config-file={}",
                p(ADMISSION_CONFIG)
            ));
        }
        let apiserver = Server::new("kube-apiserver", apiserver_args);
        apiserver.launch(&bin, &dir);
        start_watchdog(&dir);

        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = dir.join("kubeconfig");
        let cp = ControlPlane {
            bin,
            dir: dir.clone(),
            kubeconfig,
            server: server.clone(),
            etcd,
            apiserver,
        };
        for args in [
            vec![
                "config".to_string(),
                "set-cluster".into(),
                "kubeplace-test".into(),
                format!("--server={server}"),
                format!("--certificate-authority={}", p("ca.crt")),
                "--embed-certs".into(),
            ],
            vec![
                "config".into(),
                "set-credentials".into(),
                "kubeplace-admin".into(),
                format!("--client-certificate={}", p("admin.crt")),
                format!("--client-key={}", p("admin.key")),
                "--embed-certs".into(),
            ],
            vec![
                "config".into(),
                "set-context".into(),
                "kubeplace-test".into(),
                "--cluster=kubeplace-test".into(),
                "--user=kubeplace-admin".into(),
            ],
            vec![
                "config".into(),
                "use-context".into(),
                "kubeplace-test".into(),
            ],
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cp.kubectl(&args).ok();
        }

        cp.wait_ready(started);
        eprintln!(
            "kube-apiserver ready at {server} after {:.1?} (kubeconfig {})",
            started.elapsed(),
            cp.kubeconfig.display()
        );
        cp
    }

    /// Which of this control plane's servers has exited, if one has.
    fn exited_server(&self) -> Option<String> {
        self.etcd.exited().or_else(|| self.apiserver.exited())
    }

    /// Waits until `/readyz` answers, at most [`READY_TIMEOUT`] after `started`.
    fn wait_ready(&self, started: Instant) {
        loop {
            if self.kubectl(&["get", "--raw", "/readyz"]).success {
                return;
            }
            let failure = self.exited_server().or_else(|| {
                (started.elapsed() > READY_TIMEOUT)
                    .then(|| format!("not ready after {READY_TIMEOUT:?}"))
            });
            if let Some(failure) = failure {
                panic!(
                    "kube-apiserver at {}: {failure}\n--- etcd.log\n{}\n--- kube-apiserver.log\n{}",
                    self.server,
                    tail(&self.dir.join("etcd.log"), 20),
                    tail(&self.dir.join("kube-apiserver.log"), 40)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// A control plane of the caller's own, for a test that stops and restarts its
    /// servers (the shared one, [`cluster`], serves every other test).
    pub fn private() -> ControlPlane {
        ControlPlane::start(bin_dir().to_path_buf())
    }

    /// A control plane of the caller's own whose kube-apiserver presents a client
    /// certificate to every admission webhook it calls: an admission configuration
    /// (`--admission-control-config-file`) gives ValidatingAdmissionWebhook a kubeconfig whose
    /// user `*` holds the certificate, signed by a CA of its own,
    /// [`ControlPlane::webhook_client_ca`].
    pub fn private_with_webhook_client_cert() -> ControlPlane {
        ControlPlane::start_with(
            bin_dir().to_path_buf(),
            Options {
                webhook_client_cert: true,
            },
        )
    }

    /// The CA that signed the certificate kube-apiserver presents to webhooks (with
    /// [`ControlPlane::private_with_webhook_client_cert`]).
    pub fn webhook_client_ca(&self) -> PathBuf {
        self.dir.join("webhook-client-ca.crt")
    }

    /// The certificate and key kube-apiserver presents to webhooks (with
    /// [`ControlPlane::private_with_webhook_client_cert`]).
    pub fn webhook_client_cert(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join("webhook-client.crt"),
            self.dir.join("webhook-client.key"),
        )
    }

    /// Stops kube-apiserver (SIGKILL when `crash`, else SIGTERM), starts it again with
    /// the same flags, and waits until it is ready.
    pub fn restart_apiserver(&self, crash: bool) {
        self.apiserver.halt(crash);
        self.apiserver.launch(&self.bin, &self.dir);
        self.wait_ready(Instant::now());
    }

    /// Stops etcd (SIGKILL when `crash`, else SIGTERM), starts it again on the same data,
    /// and waits until kube-apiserver is ready again.
    pub fn restart_etcd(&self, crash: bool) {
        self.etcd.halt(crash);
        self.etcd.launch(&self.bin, &self.dir);
        self.wait_ready(Instant::now());
    }

    /// Stops both servers, apiserver first.
    pub fn shutdown(&self) {
        self.apiserver.halt(false);
        self.etcd.halt(false);
    }

    fn command(&self, tool: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(tool));
        cmd.current_dir(ROOT)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", self.dir.join("helm/cache"))
            .env("HELM_CONFIG_HOME", self.dir.join("helm/config"))
            .env("HELM_DATA_HOME", self.dir.join("helm/data"))
            .stdin(Stdio::null());
        cmd
    }

    /// Starts a long-running process for a test (such as `kubeplace run
    /// --kubeconfig …`), with `KUBECONFIG` set and its output in
    /// `<dir>/<name>.log`. It is killed when the tests end, like the control
    /// plane, unless stopped before.
    pub fn spawn(&self, mut cmd: Command, name: &str) -> Process {
        let log = self.dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("a log file");
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file);
        let pid = spawn_registered(cmd, name);
        record_pid(&self.dir, pid);
        Process { pid, log }
    }

    /// Runs kubectl against the control plane.
    pub fn kubectl(&self, args: &[&str]) -> Run {
        Run::of(self.command("kubectl").args(args), None)
    }

    /// Runs kubectl with `input` on its standard input.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Run {
        Run::of(self.command("kubectl").args(args), Some(input))
    }

    /// Runs helm against the control plane.
    pub fn helm(&self, args: &[&str]) -> Run {
        Run::of(self.command("helm").args(args), None)
    }

    /// A Kubernetes client of the control plane, as its kubeconfig's user.
    pub fn kube_client(&self, runtime: &tokio::runtime::Handle) -> kube::Client {
        runtime.block_on(async {
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig"),
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .expect("config");
            kube::Client::try_from(config).expect("client")
        })
    }
}

fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        run_ok(
            Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .stdin(Stdio::null()),
        )
    };
    std::fs::write(
        dir.join("apiserver.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,\
         DNS:kubernetes.default.svc,IP:10.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    std::fs::write(dir.join("admin.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    #[rustfmt::skip]
    let steps: [&[&str]; 7] = [
        &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
          "-subj", "/CN=kubeplace-test-ca", "-keyout", "ca.key", "-out", "ca.crt"],
        &["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
          "-keyout", "apiserver.key", "-out", "apiserver.csr"],
        &["x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
          "-CAcreateserial", "-days", "2", "-extfile", "apiserver.ext", "-out", "apiserver.crt"],
        // O=system:masters is bound to cluster-admin by RBAC's bootstrap policy.
        &["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/O=system:masters/CN=kubeplace-admin",
          "-keyout", "admin.key", "-out", "admin.csr"],
        &["x509", "-req", "-in", "admin.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
          "-CAcreateserial", "-days", "2", "-extfile", "admin.ext", "-out", "admin.crt"],
        &["genrsa", "-out", "sa.key", "2048"],
        &["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"],
    ];
    for step in steps {
        openssl(step);
    }
}

/// The admission configuration file kube-apiserver reads with a webhook client certificate.
const ADMISSION_CONFIG: &str = "admission.yaml";

/// A CA of its own and the client certificate kube-apiserver presents to webhooks, and the
/// admission configuration and kubeconfig that make it do so: the kubeconfig's user `*`
/// matches every webhook (a real cluster names the webhook's Service, e.g.
/// `kubeplace-webhook.kubeplace-system.svc`).
fn make_webhook_client_certificate(dir: &Path) {
    let openssl = |args: &[&str]| {
        run_ok(
            Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .stdin(Stdio::null()),
        )
    };
    std::fs::write(
        dir.join("webhook-client.ext"),
        "extendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    #[rustfmt::skip]
    let steps: [&[&str]; 3] = [
        &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
          "-subj", "/CN=kubeplace-test-webhook-client-ca",
          "-keyout", "webhook-client-ca.key", "-out", "webhook-client-ca.crt"],
        &["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver-webhook-client",
          "-keyout", "webhook-client.key", "-out", "webhook-client.csr"],
        &["x509", "-req", "-in", "webhook-client.csr", "-CA", "webhook-client-ca.crt",
          "-CAkey", "webhook-client-ca.key", "-CAcreateserial", "-days", "2",
          "-extfile", "webhook-client.ext", "-out", "webhook-client.crt"],
    ];
    for step in steps {
        openssl(step);
    }
    let path = |name: &str| dir.join(name).display().to_string();
    std::fs::write(
        dir.join("webhook-kubeconfig.yaml"),
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: '*'\n  user:\n    \
             client-certificate: {}\n    client-key: {}\n",
            path("webhook-client.crt"),
            path("webhook-client.key")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join(ADMISSION_CONFIG),
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n\
             - name: ValidatingAdmissionWebhook\n  configuration:\n    \
             apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    \
             kubeConfigFile: {}\n",
            path("webhook-kubeconfig.yaml")
        ),
    )
    .unwrap();
}

/// A finished kubectl or helm invocation.
pub struct Run {
    pub command: String,
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn of(cmd: &mut Command, input: Option<&str>) -> Run {
        let command = format!("{cmd:?}");
        let output: Output = match input {
            None => cmd.output(),
            Some(input) => {
                cmd.stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let mut child = cmd
                    .spawn()
                    .unwrap_or_else(|e| panic!("cannot run {command}: {e}"));
                let mut stdin = child.stdin.take().expect("stdin");
                stdin.write_all(input.as_bytes()).expect("write stdin");
                drop(stdin);
                child.wait_with_output()
            }
        }
        .unwrap_or_else(|e| panic!("cannot run {command}: {e}"));
        Run {
            command,
            success: output.status.success(),
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Asserts success and returns standard output.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert!(
            self.success,
            "{} failed ({:?})\n--- stdout\n{}\n--- stderr\n{}",
            self.command, self.code, self.stdout, self.stderr
        );
        &self.stdout
    }

    /// Asserts failure and returns standard error.
    #[track_caller]
    pub fn fails(&self) -> &str {
        assert!(
            !self.success,
            "{} succeeded but should have failed\n--- stdout\n{}",
            self.command, self.stdout
        );
        &self.stderr
    }
}

/// A process started by [`ControlPlane::spawn`].
pub struct Process {
    pub pid: u32,
    pub log: PathBuf,
}

impl Process {
    /// Whether it still runs.
    pub fn running(&self) -> bool {
        let mut reaper = reaper();
        let children = &mut reaper.as_mut().expect("reaper").children;
        children
            .iter_mut()
            .any(|c| c.id() == self.pid && matches!(c.try_wait(), Ok(None)))
    }

    /// Sends SIGTERM and waits up to `grace` for it to exit, then kills it.
    /// Returns whether it exited on its own within `grace`.
    pub fn stop(&self, grace: Duration) -> bool {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !self.running() {
                self.forget();
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill();
        false
    }

    /// Kills it at once (SIGKILL), as a crash would.
    pub fn kill(&self) {
        let child = {
            let mut reaper = reaper();
            let children = &mut reaper.as_mut().expect("reaper").children;
            children
                .iter()
                .position(|c| c.id() == self.pid)
                .map(|i| children.remove(i))
        };
        if let Some(mut child) = child {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.unrecord();
    }

    fn unrecord(&self) {
        if let Some(dir) = self.log.parent() {
            unrecord_pid(dir, self.pid);
        }
    }

    /// Its output so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn forget(&self) {
        let mut reaper = reaper();
        let children = &mut reaper.as_mut().expect("reaper").children;
        if let Some(i) = children.iter().position(|c| c.id() == self.pid) {
            let mut child = children.remove(i);
            let _ = child.wait();
        }
        drop(reaper);
        self.unrecord();
    }
}

// ---------------------------------------------------------------------------
// A cluster with a node

/// A control plane and a node (containerd, kubelet, kube-proxy, the controller
/// manager and the scheduler) started by `hack/local-cluster.sh`, the script
/// README gives users, with the kubeplace image built from `binary` loaded into
/// the node. Stopped (pods, mounts, rules and all) when dropped; should the test
/// process die first, the watchdog kills the daemons.
pub struct Node {
    pub cp: ControlPlane,
    /// One node at a time on this machine: two kubelets and containerds would share its
    /// cgroups, ports and iptables rules.
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// Held by the running [`Node`].
static ONE_NODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Node {
    pub fn start(binary: &Path) -> Node {
        let alone = ONE_NODE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::Builder::new()
            .prefix("kubeplace-node.")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        start_watchdog(&dir);
        let out = Command::new(Path::new(ROOT).join("hack/local-cluster.sh"))
            .arg("up")
            .arg("--dir")
            .arg(&dir)
            .arg("--binary")
            .arg(binary)
            .stdin(Stdio::null())
            .output()
            .expect("run hack/local-cluster.sh");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let node = Node {
            cp: ControlPlane {
                bin: bin_dir().to_path_buf(),
                kubeconfig: dir.join("admin.kubeconfig"),
                server: String::new(),
                dir,
                etcd: Server::new("etcd", Vec::new()),
                apiserver: Server::new("kube-apiserver", Vec::new()),
            },
            _alone: alone,
        };
        assert!(
            out.status.success(),
            "hack/local-cluster.sh up failed ({}):\n{stderr}\n{stdout}",
            out.status
        );
        eprintln!(
            "{}",
            stderr
                .lines()
                .filter(|l| l.starts_with("local-cluster:"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        node
    }
}

impl std::ops::Deref for Node {
    type Target = ControlPlane;
    fn deref(&self) -> &ControlPlane {
        &self.cp
    }
}

impl Node {
    /// What a failed test needs to be read afterwards: the Node's conditions and taints,
    /// every pod with its phase and reason, the latest events and the kubelet's last words.
    fn report(&self) {
        let cp = &self.cp;
        let mut out = String::from("---- the node when the test failed ----\n");
        for args in [
            &[
                "get",
                "nodes",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} taints={.spec.taints} conditions={range .status.conditions[*]}{.type}={.status}({.reason}) {end}{\"\\n\"}{end}",
            ][..],
            &["get", "pods", "-A", "-o", "wide"][..],
            &[
                "get",
                "pods",
                "-A",
                "-o",
                "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} phase={.status.phase} reason={.status.reason} message={.status.message} deleting={.metadata.deletionTimestamp}{\"\\n\"}{end}",
            ][..],
            &["get", "events", "-A", "--sort-by=.lastTimestamp"][..],
        ] {
            let run = cp.kubectl(args);
            out.push_str(&format!(
                "$ kubectl {}\n{}{}\n",
                args[..2].join(" "),
                run.stdout,
                run.stderr
            ));
        }
        let kubelet = std::fs::read_to_string(cp.dir.join("kubelet.log")).unwrap_or_default();
        // The kubelet is chatty; these are the lines that say why a pod stopped or waited.
        let telling = [
            "evict", "Evict", "OutOf", "pressure", "Pressure", "Killing", "refus", "NotReady",
            "E1", "E0", "admit",
        ];
        let lines: Vec<&str> = kubelet
            .lines()
            .filter(|l| telling.iter().any(|t| l.contains(t)))
            .collect();
        out.push_str("---- the kubelet's last 60 telling lines ----\n");
        out.push_str(&lines[lines.len().saturating_sub(60)..].join("\n"));
        eprintln!("{out}");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.report();
        }
        let _ = Command::new(Path::new(ROOT).join("hack/local-cluster.sh"))
            .arg("down")
            .arg("--dir")
            .arg(&self.cp.dir)
            .stdin(Stdio::null())
            .output();
    }
}
