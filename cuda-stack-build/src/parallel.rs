//! The build's compiles run side by side: a small scoped-thread pool (no dependency for build
//! scripts to compile).

/// Runs `f` on every item with up to `jobs` threads; results in item order. Each item runs on
/// a thread of its own (started by the worker that took it): NVRTC numbers the call sequences
/// in the PTX it prints with a per-thread counter that every earlier compile on that thread
/// advances, so a compile that shared its thread with others would print numbers that depend on
/// which files the scheduler happened to give that thread before it, and the generated PTX would
/// change from run to run.
pub(crate) fn run_parallel<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let jobs = jobs.clamp(1, items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let item = &items[i];
                let f = &f;
                let r = std::thread::scope(|one| {
                    one.spawn(move || f(item))
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                });
                *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .filter_map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect()
}
