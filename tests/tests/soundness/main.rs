//! `tests/soundness`: each hole a safe program could once open, as a run-and-observe GPU test.
//! Each test must end in a typed error or a correct result, and run clean under
//! `compute-sanitizer --tool memcheck`. (What a type can forbid is in `compile_fail/`.)
//!
//! The rules these guard are written down in `cuda-stack-driver`'s crate docs ("Soundness model").

use cuda_stack_driver::cuda_stack_sys::{fault, CUresult};
use cuda_stack_driver::{Context, DeviceSlice, Error, Kernel, LaunchConfig, PinnedBuffer, Stream};
use cuda_tests::{context, ensure, gpu, load_cuda, TestResult, TEST_KERNELS};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

mod callbacks;
mod contexts;
mod driver_errors;
mod globals;
mod graphs;
mod images;
mod launches;

use callbacks::*;
use contexts::*;
use driver_errors::*;
use globals::*;
use graphs::*;
use images::*;
use launches::*;

fn main() {
    cuda_tests::run(vec![
        // 2. A graph owns its kernels' modules.
        gpu("graph_outlives_module_and_kernel", graph_outlives_module),
        gpu("graph_outlives_its_buffers", graph_outlives_buffers),
        // 3. Capture state and enqueue are one step.
        gpu("capture_is_on_its_own_stream", capture_own_stream),
        gpu("capture_vs_enqueue_stress_threads", capture_stress),
        gpu("capture_refuses_what_a_graph_cannot_own", capture_refusals),
        gpu(
            "capture_private_pool_closes_with_the_capture_threads",
            capture_pool_stress,
        ),
        // 4. Errors after work was queued leave it tracked or finished.
        gpu("error_after_launch_settles_the_stream", error_after_launch),
        gpu("error_after_dtod_settles_the_stream", error_after_dtod),
        gpu(
            "error_after_async_htod_settles_the_stream",
            error_after_async_htod,
        ),
        gpu("failed_wait_still_waits_for_the_dma", failed_pending_wait),
        gpu(
            "error_after_graph_launch_settles_the_stream",
            error_after_graph_launch,
        ),
        // 5. Smaller holes.
        gpu("host_callback_cuda_call_is_refused", callback_cuda_refused),
        gpu("host_callback_drops_are_deferred", callback_drops_deferred),
        gpu(
            "host_callback_panic_payload_drop_panics",
            callback_payload_panics,
        ),
        gpu(
            "device_global_write_waits_for_kernels",
            global_write_ordered,
        ),
        gpu(
            "device_global_read_is_ordered_with_graph_replays",
            global_read_vs_replay,
        ),
        gpu("foreign_stream_is_checked", foreign_stream_checked),
        gpu(
            "binary_images_are_checked_before_the_driver_reads_them",
            binary_images_checked,
        ),
        gpu(
            "per_thread_stream_handles_and_overaligned_pinned_types_refused",
            special_handles_and_alignment,
        ),
        gpu2("push_current_keeps_bind_cache_honest", push_current_cache),
        gpu2(
            "cross_device_graph_and_global_refused",
            cross_device_refusals,
        ),
    ]);
}

use cuda_tests::{axpy_kernel as axpy, gpu2, slow_fill_kernel as slow_fill, Axpy, SlowFill};
