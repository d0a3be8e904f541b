// grid_dependency.cuh — programmatic dependent launch (sm_90+): a kernel launched with a
// programmatic dependency (LaunchConfig::with_programmatic_dependency) may start while the kernel
// before it in the stream is still running. It must wait for that kernel (griddep_wait) before
// its first access to global memory; it may let the kernel after it launch early
// (griddep_launch_dependents). Launched without the dependency, both return at once.
#pragma once

// Waits until every kernel this one depends on has completed and its memory is visible.
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Lets the next kernel in the stream (when launched with a programmatic dependency) be scheduled
// once every block of this one has run this or exited. It orders nothing: the next kernel still
// waits for this one's completion in its own griddep_wait.
__device__ __forceinline__ void griddep_launch_dependents() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
