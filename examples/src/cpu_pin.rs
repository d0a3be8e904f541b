//! Running a benchmark and the processes it starts on one CPU, so that a paired comparison
//! (ours beside CuPy's, block after block) compares the libraries rather than the cores the
//! scheduler happened to give each process.

/// The CPU the calling thread is running on now (`sched_getcpu`), if the kernel says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments; returns -1 on failure.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// Restricts the calling thread, and every thread and process it starts from now on, to `cpu`
/// (`sched_setaffinity`). Call it before anything starts threads (CUDA's included) so that they
/// inherit it too.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    if cpu >= max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond the {max} a cpu_set_t holds"),
        ));
    }
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes bit `cpu` inside the set
    // (checked above); sched_setaffinity reads `size_of::<cpu_set_t>()` bytes from a live local.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
