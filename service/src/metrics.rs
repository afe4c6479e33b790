//! The server's metrics in Prometheus' text format (`GetMetrics`, and `/metrics` over HTTP):
//! the engine's stage ledger live (partitions and bytes per stage, host and device, buffers per
//! kind, resident entries, each with its peak since the server started), the queue per kind and
//! priority, jobs ended per kind and outcome, proof durations per kind, the parameters held,
//! this node's claims, retries and leases, and every node's heartbeat and running jobs.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use prover_core::accounting::ledger::{BufferKind, ResidentKind, Snapshot, Stage};

/// A job's kind and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Ended {
    kind: String,
    outcome: String,
}

/// A proof kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

/// A proof kind and a priority.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Queue {
    kind: String,
    priority: String,
}

/// A node of the store's servers.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabel {
    node: String,
}

/// A partition stage.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: String,
}

fn histogram() -> Histogram {
    // 0.25 s to about 68 minutes, doubling.
    Histogram::new(exponential_buckets(0.25, 2.0, 15))
}

/// The counters and histograms kept for the server's life; the rest is read at each scrape.
pub struct Metrics {
    ended: Family<Ended, Counter>,
    durations: Family<Kind, Histogram, fn() -> Histogram>,
    claims: Counter,
    retries: Counter,
    lease_expiries: Counter,
    leases_lost: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            ended: Family::default(),
            durations: Family::new_with_constructor(histogram as fn() -> Histogram),
            claims: Counter::default(),
            retries: Counter::default(),
            lease_expiries: Counter::default(),
            leases_lost: Counter::default(),
        }
    }
}

/// What a scrape reads besides the kept metrics.
pub struct Scrape<'a> {
    /// The engine's ledger.
    pub ledger: &'a Snapshot,
    /// Queued jobs: kind, priority (1 to 4), count.
    pub queued: &'a [(String, i32, u64)],
    /// The kind of each job being proven.
    pub running: &'a [String],
    /// Bytes of the parameters held.
    pub parameters_bytes: u64,
    /// Seconds since the server started.
    pub uptime_seconds: u64,
    /// The store's nodes.
    pub nodes: &'a [crate::store::NodeRecord],
}

fn priority_name(p: i32) -> String {
    match p {
        1 => "low".into(),
        2 => "normal".into(),
        3 => "high".into(),
        4 => "critical".into(),
        other => other.to_string(),
    }
}

fn gauge_family<L>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    values: impl IntoIterator<Item = (L, u64)>,
) where
    L: EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::<L, Gauge>::default();
    for (label, v) in values {
        family
            .get_or_create(&label)
            .set(i64::try_from(v).unwrap_or(i64::MAX));
    }
    registry.register(name, help, family);
}

fn gauge(registry: &mut Registry, name: &str, help: &str, v: u64) {
    let g = Gauge::<i64>::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    registry.register(name, help, g);
}

impl Metrics {
    /// Counts a job that ended: `outcome` is `completed` or `failed`.
    pub fn ended(&self, kind: &str, outcome: &str, seconds: f64) {
        self.ended
            .get_or_create(&Ended {
                kind: kind.into(),
                outcome: outcome.into(),
            })
            .inc();
        if outcome == "completed" {
            self.durations
                .get_or_create(&Kind { kind: kind.into() })
                .observe(seconds);
        }
    }

    /// Counts a claim of a job's attempt `attempt` (above 1: a retry).
    pub fn claimed(&self, attempt: u32) {
        self.claims.inc();
        if attempt > 1 {
            self.retries.inc();
        }
    }

    /// Counts a job whose lease ran out, found by this node.
    pub fn lease_expired(&self) {
        self.lease_expiries.inc();
    }

    /// Counts a job this node ran whose attempt it lost.
    pub fn lease_lost(&self) {
        self.leases_lost.inc();
    }

    /// The text exposition of every metric.
    pub fn render(&self, s: &Scrape<'_>) -> String {
        let mut r = Registry::default();
        let l = s.ledger;
        let stages = || {
            Stage::ALL.iter().map(|&st| {
                let label = StageLabel {
                    stage: st.name().into(),
                };
                (label, st)
            })
        };
        gauge_family(
            &mut r,
            "proofline_ledger_partitions",
            "Partitions in each stage now",
            stages().map(|(n, st)| (n, l.stage(st).count.live)),
        );
        gauge_family(
            &mut r,
            "proofline_ledger_partitions_peak",
            "Most partitions in each stage at once since the server started",
            stages().map(|(n, st)| (n, l.stage(st).count.peak)),
        );
        gauge_family(
            &mut r,
            "proofline_ledger_host_bytes",
            "Host bytes of the large buffers held by partitions in each stage now",
            stages().map(|(n, st)| (n, l.stage(st).bytes.live)),
        );
        gauge_family(
            &mut r,
            "proofline_ledger_host_bytes_peak",
            "Most host bytes held in each stage at once since the server started",
            stages().map(|(n, st)| (n, l.stage(st).bytes.peak)),
        );
        gauge_family(
            &mut r,
            "proofline_ledger_device_bytes",
            "Device bytes held by partitions in each stage now",
            stages().map(|(n, st)| (n, l.stage_device(st).live)),
        );
        gauge_family(
            &mut r,
            "proofline_ledger_device_bytes_peak",
            "Most device bytes held in each stage at once since the server started",
            stages().map(|(n, st)| (n, l.stage_device(st).peak)),
        );
        let kinds = || {
            BufferKind::ALL.iter().map(|&k| {
                (
                    Kind {
                        kind: k.name().into(),
                    },
                    k,
                )
            })
        };
        gauge_family(
            &mut r,
            "proofline_ledger_buffers",
            "Large buffers of each kind held now",
            kinds().map(|(n, k)| (n, l.kind(k).count.live)),
        );
        gauge_family(
            &mut r,
            "proofline_ledger_buffer_bytes",
            "Bytes of the large buffers of each kind held now",
            kinds().map(|(n, k)| (n, l.kind(k).bytes.live)),
        );
        gauge_family(
            &mut r,
            "proofline_ledger_buffer_bytes_peak",
            "Most bytes of each kind held at once since the server started",
            kinds().map(|(n, k)| (n, l.kind(k).bytes.peak)),
        );
        let residents = || {
            ResidentKind::ALL.iter().map(|&k| {
                (
                    Kind {
                        kind: k.name().into(),
                    },
                    k,
                )
            })
        };
        gauge_family(
            &mut r,
            "proofline_ledger_resident_bytes",
            "Bytes of the resident entries of each kind (device bases, job inputs, ...) now",
            residents().map(|(n, k)| (n, l.resident(k).bytes.live)),
        );
        gauge_family(
            &mut r,
            "proofline_ledger_resident_bytes_peak",
            "Most bytes of the resident entries of each kind since the server started",
            residents().map(|(n, k)| (n, l.resident(k).bytes.peak)),
        );
        gauge(
            &mut r,
            "proofline_ledger_total_bytes",
            "Host bytes of every partition's large buffers now",
            l.total_bytes.live,
        );
        gauge(
            &mut r,
            "proofline_ledger_total_bytes_peak",
            "Most host bytes of partitions' large buffers at once since the server started",
            l.total_bytes.peak,
        );
        let queue = Family::<Queue, Gauge>::default();
        for (kind, priority, n) in s.queued {
            queue
                .get_or_create(&Queue {
                    kind: kind.clone(),
                    priority: priority_name(*priority),
                })
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        r.register(
            "proofline_queue_depth",
            "Jobs queued, per kind and priority",
            queue,
        );
        let running = Family::<Kind, Gauge>::default();
        for kind in s.running {
            running.get_or_create(&Kind { kind: kind.clone() }).inc();
        }
        r.register(
            "proofline_jobs_running",
            "Jobs being proven, per kind",
            running,
        );
        r.register(
            "proofline_jobs",
            "Jobs ended since the server started, per kind and outcome",
            self.ended.clone(),
        );
        r.register(
            "proofline_proof_duration_seconds",
            "Seconds from a job's claim to its checked proof, per kind",
            self.durations.clone(),
        );
        gauge(
            &mut r,
            "proofline_parameters_bytes",
            "Bytes of the parameters held loaded",
            s.parameters_bytes,
        );
        r.register(
            "proofline_claims",
            "Jobs this node claimed since it started",
            self.claims.clone(),
        );
        r.register(
            "proofline_retries",
            "Claims by this node of a job tried before",
            self.retries.clone(),
        );
        r.register(
            "proofline_lease_expiries",
            "Running jobs whose lease ran out, found by this node and queued again or failed",
            self.lease_expiries.clone(),
        );
        r.register(
            "proofline_leases_lost",
            "Jobs this node ran whose lease ran out before their result was written",
            self.leases_lost.clone(),
        );
        gauge_family(
            &mut r,
            "proofline_node_heartbeat_age_milliseconds",
            "Milliseconds since each live node's last heartbeat, by the store's clock",
            s.nodes.iter().filter_map(|n| {
                let label = NodeLabel {
                    node: n.name.clone(),
                };
                n.heartbeat_age_ms.map(|a| (label, a))
            }),
        );
        gauge_family(
            &mut r,
            "proofline_node_jobs_running",
            "Jobs each node runs",
            s.nodes.iter().map(|n| {
                let label = NodeLabel {
                    node: n.name.clone(),
                };
                (label, n.running)
            }),
        );
        gauge(
            &mut r,
            "proofline_uptime_seconds",
            "Seconds since the server started",
            s.uptime_seconds,
        );
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &r);
        out
    }
}
