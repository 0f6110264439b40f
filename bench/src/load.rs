//! HTTP timing: sequential GETs (P6) and a paced open-loop load generator (P7).

use std::time::{Duration, Instant};

use crate::stats::Samples;

/// Result of a paced run.
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// Latency of every request that got an answer.
    pub latencies: Samples,
    /// Requests answered 200.
    pub ok: usize,
    /// Requests that failed or answered something else.
    pub errors: usize,
    /// Requests sent more than 1 ms after their slot (the generator or the agent fell behind).
    pub late: usize,
    /// Answered requests per second over the whole run.
    pub achieved_rate: f64,
}

/// An HTTP client with keep-alive connections.
fn client() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into()
}

/// One GET: its latency, if it answered 200.
fn timed_get(http: &ureq::Agent, url: &str) -> Result<Duration, String> {
    let sent = Instant::now();
    let mut resp = http.get(url).call().map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    // Read the body so the connection goes back to the pool.
    let _ = resp.body_mut().read_to_vec();
    if status == 200 {
        Ok(sent.elapsed())
    } else {
        Err(format!("status {status}"))
    }
}

/// `count` sequential GETs of `url` on one keep-alive connection (after one warm-up request).
pub fn sequential(url: &str, count: usize) -> Result<Samples, String> {
    let http = client();
    timed_get(&http, url)?;
    let mut lat = Vec::with_capacity(count);
    for _ in 0..count {
        lat.push(timed_get(&http, url)?);
    }
    Ok(Samples::from_durations(&lat))
}

/// GETs `url` at `rate` requests per second in total for `duration`, from `threads` threads,
/// each with its own keep-alive connection. Open loop: request `k` of thread `t` is due at
/// `(k × threads + t) / rate`; a thread that falls behind sends at once (and counts it late).
/// Latency runs from the actual send to the end of the body.
pub fn paced(url: &str, rate: f64, duration: Duration, threads: usize) -> LoadResult {
    let per_thread = (rate * duration.as_secs_f64() / threads as f64).round() as usize;
    let interval = Duration::from_secs_f64(threads as f64 / rate);
    let began = Instant::now() + Duration::from_millis(100);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let url = url.to_string();
            std::thread::spawn(move || {
                let http = client();
                // Open the connection before the clock starts.
                let _ = timed_get(&http, &url);
                let offset = Duration::from_secs_f64(t as f64 / rate);
                let (mut lat, mut errors, mut late) = (Vec::with_capacity(per_thread), 0, 0);
                for k in 0..per_thread {
                    let due = began + offset + interval * k as u32;
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    } else if now - due > Duration::from_millis(1) {
                        late += 1;
                    }
                    match timed_get(&http, &url) {
                        Ok(d) => lat.push(d),
                        Err(_) => errors += 1,
                    }
                }
                (lat, errors, late)
            })
        })
        .collect();
    let (mut all, mut errors, mut late) = (Vec::new(), 0, 0);
    for h in handles {
        if let Ok((lat, e, l)) = h.join() {
            all.extend(lat);
            errors += e;
            late += l;
        }
    }
    let elapsed = began.elapsed().as_secs_f64().max(1e-9);
    let ok = all.len();
    LoadResult {
        latencies: Samples::from_durations(&all),
        ok,
        errors,
        late,
        achieved_rate: ok as f64 / elapsed,
    }
}
