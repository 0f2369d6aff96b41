//! The fault-injecting TCP proxy between the actors and one server: each connection is
//! passed through, or its response delayed, or dropped (the request reaches the server,
//! its answer never reaches the caller). The actors open one connection per request, so
//! a connection's fate is a request's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::rng::Rng;

/// A proxy in front of the server at `127.0.0.1:{target}`.
pub struct Proxy {
    /// The port the actors call.
    pub port: u16,
    faulty: Arc<AtomicBool>,
    /// Responses dropped and delayed so far.
    pub dropped: Arc<AtomicU64>,
    pub delayed: Arc<AtomicU64>,
}

impl Proxy {
    /// Starts a proxy to `target`, drawing each connection's fate from `rng`: 5 % dropped,
    /// 5 % delayed by up to 2 s, while faults are on.
    pub async fn start(target: u16, rng: Rng) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let port = listener.local_addr().expect("the proxy's address").port();
        let faulty = Arc::new(AtomicBool::new(true));
        let dropped = Arc::new(AtomicU64::new(0));
        let delayed = Arc::new(AtomicU64::new(0));
        let rng = Arc::new(Mutex::new(rng));
        let (f, d, l) = (faulty.clone(), dropped.clone(), delayed.clone());
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let fate = match rng.lock() {
                    Ok(mut rng) if f.load(Ordering::Relaxed) => {
                        let delay = rng_delay(&mut rng);
                        rng.pick(&[(90, Fate::Pass), (5, Fate::Drop), (5, Fate::Delay(delay))])
                    }
                    _ => Fate::Pass,
                };
                match fate {
                    Fate::Drop => d.fetch_add(1, Ordering::Relaxed),
                    Fate::Delay(_) => l.fetch_add(1, Ordering::Relaxed),
                    Fate::Pass => 0,
                };
                tokio::spawn(relay(inbound, target, fate));
            }
        });
        Proxy {
            port,
            faulty,
            dropped,
            delayed,
        }
    }

    /// Stops injecting faults (the drain).
    pub fn calm(&self) {
        self.faulty.store(false, Ordering::Relaxed);
    }
}

fn rng_delay(rng: &mut Rng) -> u64 {
    100 + rng.below(1_900)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    Pass,
    /// The response is held this many ms.
    Delay(u64),
    /// The request is forwarded; the response is not.
    Drop,
}

async fn relay(mut inbound: TcpStream, target: u16, fate: Fate) {
    let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await else {
        return;
    };
    let (mut in_read, mut in_write) = inbound.split();
    let (mut out_read, mut out_write) = outbound.split();
    let requests = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match in_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = out_write.shutdown().await;
        // The relay ends with the response (or its drop), not with the request.
        std::future::pending::<()>().await
    };
    let responses = async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut first = true;
        loop {
            match out_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if first {
                        first = false;
                        match fate {
                            // The server did the work; the caller never hears of it.
                            Fate::Drop => return,
                            Fate::Delay(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                            Fate::Pass => {}
                        }
                    }
                    if in_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = in_write.shutdown().await;
    };
    // A dropped response ends the connection: the caller sees it closed.
    tokio::select! {
        _ = requests => {}
        _ = responses => {}
    }
}
