//! The Delta kernel's engine for every table tidemark opens: the stock one, with its reads run
//! on the thread that waits for them.
//!
//! delta-rs replays a table's log with the kernel, whose interface is synchronous: it runs on
//! tokio's blocking pool, and each read it makes (a listing, a commit, a checkpoint) goes
//! through its engine's executor, which for a multi-threaded runtime hands the read to a
//! worker thread and sleeps on a channel until the worker sends the answer back. Two thread
//! switches a read, a dozen reads a table opened: a job over 10,000 tables spent more of its
//! time switching than reading. The executor here runs the read on the waiting thread itself,
//! in the runtime's context (its I/O and timers are driven by the workers as before; a worker
//! thread that has to wait hands its other tasks over first, as the stock executor does).
//! Everything else about the engine, and every other operation of the log store, is
//! delta-rs' own (and so are the few kernel reads delta-rs makes with the inner store's own
//! engine: finding a log's latest version, as after a commit conflict).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake};

use delta_kernel::{DeltaResult, Engine};
use delta_kernel_default_engine::DefaultEngineBuilder;
use delta_kernel_default_engine::executor::TaskExecutor;
use deltalake::DeltaResult as DeltaRsResult;
use deltalake::kernel::transaction::TransactionError;
use deltalake::logstore::object_store::ObjectStore;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::{
    CommitOrBytes, LogStore, LogStoreConfig, LogStoreFactory, LogStoreRef, StorageConfig,
    logstore_factories,
};
use futures::TryFutureExt;
use futures::future::BoxFuture;
use tokio::runtime::{EnterGuard, Handle, RuntimeFlavor};
use url::Url;
use uuid::Uuid;

/// Every log store delta-rs makes from now on (for any scheme) uses [`Here`]'s engine.
/// Idempotent; called before the first table is opened.
pub fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let registry = logstore_factories();
        let factories: Vec<_> = registry
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        for (scheme, inner) in factories {
            registry.insert(scheme, Arc::new(Factory { inner }));
        }
    });
}

/// A factory's log stores, with [`Here`]'s engine.
struct Factory {
    inner: Arc<dyn LogStoreFactory>,
}

impl LogStoreFactory for Factory {
    fn with_options(
        &self,
        prefixed_store: Arc<dyn ObjectStore>,
        root_store: Arc<dyn ObjectStore>,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaRsResult<Arc<dyn LogStore>> {
        let inner = self
            .inner
            .with_options(prefixed_store, root_store, location, options)?;
        Ok(with_engine_here(inner))
    }
}

/// `inner` with [`Here`]'s engine (kept for the store's life).
pub fn with_engine_here(inner: LogStoreRef) -> LogStoreRef {
    Arc::new(Store {
        inner,
        engine: OnceLock::new(),
    })
}

/// A log store whose kernel engine runs reads on the waiting thread. Every other method is
/// the inner store's own, called on it directly (`as_ref`: delta-rs' `LogStore` for `Arc`
/// forwards all but `transaction_url`).
struct Store {
    inner: LogStoreRef,
    /// The engine of the store's own object store (made on first use).
    engine: OnceLock<Arc<dyn Engine>>,
}

#[async_trait::async_trait]
impl LogStore for Store {
    fn name(&self) -> String {
        self.inner.as_ref().name()
    }

    async fn refresh(&self) -> DeltaRsResult<()> {
        self.inner.as_ref().refresh().await
    }

    async fn read_commit_entry(
        &self,
        version: deltalake::kernel::Version,
    ) -> DeltaRsResult<Option<bytes::Bytes>> {
        self.inner.as_ref().read_commit_entry(version).await
    }

    async fn write_commit_entry(
        &self,
        version: deltalake::kernel::Version,
        commit_or_bytes: CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        self.inner
            .as_ref()
            .write_commit_entry(version, commit_or_bytes, operation_id)
            .await
    }

    async fn abort_commit_entry(
        &self,
        version: deltalake::kernel::Version,
        commit_or_bytes: CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        self.inner
            .as_ref()
            .abort_commit_entry(version, commit_or_bytes, operation_id)
            .await
    }

    async fn get_latest_version(
        &self,
        start_version: deltalake::kernel::Version,
    ) -> DeltaRsResult<deltalake::kernel::Version> {
        self.inner.as_ref().get_latest_version(start_version).await
    }

    fn object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.as_ref().object_store(operation_id)
    }

    fn root_object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.as_ref().root_object_store(operation_id)
    }

    fn engine(&self, operation_id: Option<Uuid>) -> Arc<dyn Engine> {
        // Only a multi-threaded runtime has threads to wait on (a unit test's single-threaded
        // runtime keeps the stock engine, which runs its own).
        let Some(handle) = multi_threaded() else {
            return self.inner.as_ref().engine(operation_id);
        };
        let make = || -> Arc<dyn Engine> {
            let store = self.inner.as_ref().root_object_store(operation_id);
            Arc::new(
                DefaultEngineBuilder::new(store)
                    .with_task_executor(Arc::new(Here { handle }))
                    .build(),
            )
        };
        match operation_id {
            None => self.engine.get_or_init(make).clone(),
            Some(_) => make(),
        }
    }

    fn to_uri(&self, location: &Path) -> String {
        self.inner.as_ref().to_uri(location)
    }

    fn root_url(&self) -> &Url {
        self.inner.as_ref().root_url()
    }

    fn log_path(&self) -> &Path {
        self.inner.as_ref().log_path()
    }

    fn transaction_url(&self, operation_id: Option<Uuid>) -> DeltaRsResult<Url> {
        self.inner.as_ref().transaction_url(operation_id)
    }

    async fn is_delta_table_location(&self) -> DeltaRsResult<bool> {
        self.inner.as_ref().is_delta_table_location().await
    }

    fn config(&self) -> &LogStoreConfig {
        self.inner.as_ref().config()
    }

    fn object_store_url(&self) -> datafusion::execution::object_store::ObjectStoreUrl {
        self.inner.as_ref().object_store_url()
    }
}

/// The kernel's executor that runs what it waits for on the waiting thread.
#[derive(Debug)]
struct Here {
    /// The runtime the engine was made in, for a thread outside any (a store's engine is kept
    /// for the store's life; the runtime of the asking thread comes first).
    handle: Handle,
}

impl Here {
    /// The asking thread's multi-threaded runtime, else the one the engine was made in.
    fn handle(&self) -> Handle {
        multi_threaded().unwrap_or_else(|| self.handle.clone())
    }
}

/// The asking thread's runtime, when it is a multi-threaded one.
fn multi_threaded() -> Option<Handle> {
    Handle::try_current()
        .ok()
        .filter(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Wakes the thread that waits in [`run_here`]: a flag of its own, so that a wake is never
/// lost to something else on that thread that parks it too (the thread's one park token).
struct Unpark {
    thread: std::thread::Thread,
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Poll `task` on this thread until it is done, sleeping while it waits.
fn run_here<F: Future>(task: F) -> F::Output {
    let unpark = Arc::new(Unpark {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = unpark.clone().into();
    let mut cx = Context::from_waker(&waker);
    let mut task = std::pin::pin!(task);
    loop {
        if let Poll::Ready(out) = task.as_mut().poll(&mut cx) {
            return out;
        }
        // Until woken: a spurious return of `park` parks again, a wake before it returns at once.
        while !unpark.woken.swap(false, Ordering::Acquire) {
            std::thread::park();
        }
    }
}

impl TaskExecutor for Here {
    type Guard<'a> = EnterGuard<'a>;

    fn block_on<T>(&self, task: T) -> T::Output
    where
        T: Future + Send + 'static,
        T::Output: Send + 'static,
    {
        let handle = self.handle();
        let _runtime = handle.enter();
        // On a worker thread its other tasks are handed over first; elsewhere (the blocking
        // pool, where delta-rs runs the kernel) this only runs the closure.
        tokio::task::block_in_place(|| run_here(task))
    }

    fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.handle().spawn(task);
    }

    fn spawn_blocking<T, R>(&self, task: T) -> BoxFuture<'_, DeltaResult<R>>
    where
        T: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        Box::pin(
            self.handle()
                .spawn_blocking(task)
                .map_err(delta_kernel::Error::join_failure),
        )
    }

    fn enter(&self) -> EnterGuard<'_> {
        self.handle.enter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the executor waits for runs on the waiting thread, with the runtime's timers and
    /// tasks at hand, from the blocking pool and from a worker alike.
    #[test]
    fn runs_what_it_waits_for_on_the_waiting_thread() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let here = Arc::new(Here {
            handle: rt.handle().clone(),
        });
        let task = |here: Arc<Here>| {
            let waiting = std::thread::current().id();
            here.block_on(async move {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                let spawned = tokio::spawn(async { 2 + 2 }).await.unwrap();
                (std::thread::current().id() == waiting, spawned)
            })
        };
        let h = here.clone();
        let from_pool = rt.block_on(rt.spawn_blocking(move || task(h))).unwrap();
        assert_eq!(from_pool, (true, 4));
        let h = here.clone();
        let from_worker = rt.block_on(rt.spawn(async move { task(h) })).unwrap();
        assert_eq!(from_worker, (true, 4));
    }
}
