//! Natural batching: calls of one kind that arrive while the database is busy share the
//! next round trip.
//!
//! A call joins a queue; when fewer than `max_in_flight` flushes run, a flush starts at
//! once and takes everything queued (up to `max_batch`). So an idle engine answers with
//! no added delay, and a busy one answers many calls with one statement or transaction.
//! Each flush runs on a task of its own: a caller that gives up (an HTTP timeout) never
//! cuts a flush short, so the calls batched with it are answered whatever it does.
//!
//! A flush answers each item, or `None` for items it could not settle (for example when
//! the whole batch failed and was rolled back): the caller then does its item alone, on
//! the single-item path, which gives that item its own precise answer.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

/// What a flush answers: one entry per item, in order; `None` sends that item down the
/// single-item path.
pub(crate) type Settled<O> = Vec<Option<O>>;

type Flush<I, O> =
    Arc<dyn Fn(Vec<I>) -> Pin<Box<dyn Future<Output = Settled<O>> + Send>> + Send + Sync>;

/// Groups concurrent calls into batches (see the module documentation).
pub(crate) struct Batcher<I, O> {
    queue: Mutex<VecDeque<(I, oneshot::Sender<Option<O>>)>>,
    flushers: Arc<Semaphore>,
    max_batch: usize,
    flush: Flush<I, O>,
    /// Observes the size of every flush.
    sizes: Option<prometheus::Histogram>,
}

impl<I: Send + 'static, O: Send + 'static> Batcher<I, O> {
    /// A batcher that runs at most `max_in_flight` flushes at once, each of at most
    /// `max_batch` items, observing each flush's size in `sizes`.
    pub(crate) fn new<F, Fut>(
        max_in_flight: usize,
        max_batch: usize,
        sizes: Option<prometheus::Histogram>,
        flush: F,
    ) -> Arc<Self>
    where
        F: Fn(Vec<I>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Settled<O>> + Send + 'static,
    {
        Arc::new(Batcher {
            queue: Mutex::new(VecDeque::new()),
            flushers: Arc::new(Semaphore::new(max_in_flight.max(1))),
            max_batch: max_batch.max(1),
            flush: Arc::new(move |items| Box::pin(flush(items))),
            sizes,
        })
    }

    /// Hands `item` to the next flush and waits for its answer. `None` when the flush
    /// could not settle it: the caller does it alone.
    pub(crate) async fn call(self: &Arc<Self>, item: I) -> Option<O> {
        let (answer, answered) = oneshot::channel();
        match self.queue.lock() {
            Ok(mut queue) => queue.push_back((item, answer)),
            Err(_) => return None,
        }
        self.start_flushing();
        answered.await.ok().flatten()
    }

    /// Hands `items` to the next flushes together (so they share as few flushes as
    /// `max_batch` allows) and waits for their answers, in order; `None` as for [`Batcher::call`].
    pub(crate) async fn call_many(
        self: &Arc<Self>,
        items: impl IntoIterator<Item = I>,
    ) -> Vec<Option<O>> {
        let mut waiting = Vec::new();
        match self.queue.lock() {
            Ok(mut queue) => {
                for item in items {
                    let (answer, answered) = oneshot::channel();
                    queue.push_back((item, answer));
                    waiting.push(answered);
                }
            }
            Err(_) => return items.into_iter().map(|_| None).collect(),
        }
        self.start_flushing();
        let mut answers = Vec::with_capacity(waiting.len());
        for answered in waiting {
            answers.push(answered.await.ok().flatten());
        }
        answers
    }

    /// Starts a flushing task unless `max_in_flight` already run.
    fn start_flushing(self: &Arc<Self>) {
        if let Ok(permit) = self.flushers.clone().try_acquire_owned() {
            let batcher = self.clone();
            tokio::spawn(async move { batcher.drain(permit).await });
        }
    }

    /// Flushes until the queue is empty. A call queued while the last flushing task
    /// gives up its permit is seen by one of the two: the caller queues, then tries for
    /// a permit; the task gives the permit back, then looks at the queue again.
    async fn drain(self: Arc<Self>, permit: OwnedSemaphorePermit) {
        let mut permit = Some(permit);
        loop {
            let batch: Vec<(I, oneshot::Sender<Option<O>>)> = match self.queue.lock() {
                Ok(mut queue) => {
                    let n = queue.len().min(self.max_batch);
                    queue.drain(..n).collect()
                }
                Err(_) => return,
            };
            if batch.is_empty() {
                drop(permit.take());
                let waiting = self.queue.lock().map(|q| !q.is_empty()).unwrap_or(false);
                match waiting
                    .then(|| self.flushers.clone().try_acquire_owned().ok())
                    .flatten()
                {
                    Some(again) => {
                        permit = Some(again);
                        continue;
                    }
                    None => return,
                }
            }
            let (items, answers): (Vec<I>, Vec<_>) = batch.into_iter().unzip();
            if let Some(sizes) = &self.sizes {
                sizes.observe(items.len() as f64);
            }
            // A panicking flush settles nothing: every caller does its item alone.
            let settled = AssertUnwindSafe((self.flush)(items))
                .catch_unwind()
                .await
                .unwrap_or_default();
            let mut settled = settled.into_iter();
            for answer in answers {
                let _ = answer.send(settled.next().flatten());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_call_gets_its_own_answer_and_busy_calls_share_flushes() {
        let flushes = Arc::new(AtomicUsize::new(0));
        let counted = flushes.clone();
        let batcher = Batcher::new(1, 64, None, move |items: Vec<u32>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                items.into_iter().map(|i| Some(i * 2)).collect()
            }
        });
        let calls: Vec<_> = (0..500u32)
            .map(|i| {
                let b = batcher.clone();
                tokio::spawn(async move { (i, b.call(i).await) })
            })
            .collect();
        for call in calls {
            let (i, answer) = call.await.expect("call task");
            assert_eq!(answer, Some(i * 2));
        }
        assert!(
            flushes.load(Ordering::SeqCst) < 500,
            "500 concurrent calls should share flushes"
        );
    }

    #[tokio::test]
    async fn items_a_flush_leaves_unsettled_or_a_panicking_flush_answer_none() {
        let batcher = Batcher::new(2, 8, None, |items: Vec<u32>| async move {
            if items.contains(&13) {
                panic!("unlucky");
            }
            items
                .into_iter()
                .map(|i| (i % 2 == 0).then_some(i))
                .collect()
        });
        assert_eq!(batcher.call(4).await, Some(4));
        assert_eq!(batcher.call(5).await, None);
        assert_eq!(batcher.call(13).await, None);
        // The batcher still works after a panic.
        assert_eq!(batcher.call(6).await, Some(6));
    }
}
