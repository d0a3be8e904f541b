//! CUDA graphs: capture a stream's work once, replay it with one launch.
//!
//! ## Capture takes a stream of its own
//! A capture runs on a stream made for it ([`Context::begin_capture`], or [`Stream::capture`]
//! with a closure), the way `torch.cuda.graph` captures on a side stream. No other handle to that
//! stream exists when the capture begins, and every enqueue on it holds the stream's capture gate
//! (a read lock) across its check, driver call and bookkeeping, while the capture's start and end
//! take the write side. So whichever thread queues work on the stream, the work lands in the graph
//! exactly when the bookkeeping says so, and a graph owns everything its nodes reference:
//! - the device buffers the captured work reads or writes;
//! - the kernels (and so their modules) of its kernel nodes.
//!
//! What a graph could not own is refused on a capturing stream with [`Error::Unsupported`]:
//! host callbacks (an `FnOnce` would run at every replay), copies to or from host memory, event
//! records, and launching another graph.
//!
//! Allocating on a capturing stream is allowed and is **not** captured: the buffer is a plain
//! `cuMemAlloc` made at capture time (not a graph memory node), and like every buffer the
//! captured work uses, the graph keeps it alive — dropping the buffer during the capture (a
//! temporary) leaves the memory with the graph, which frees it when it is dropped. This is what
//! lets a whole training step, temporaries and all, be captured. A caching allocator above may
//! reuse such a temporary for a later allocation *of the same capture* (PyTorch's graph-private
//! pool) when the capture is its only other owner ([`crate::DeviceBuffer::held_only_by_capture`]):
//! the capture is one chain of work on its stream, so the later user's nodes follow the earlier
//! user's in every replay.

use crate::module::ModuleInner;
use crate::stream::Captured;
use crate::{driver, Context, DeviceRepr, Error, Result, Stream};
use cuda_stack_sys::{
    CUgraph, CUgraphExec, CUgraphNode, CUgraphNodeType, CUresult, CUstreamCaptureMode,
};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A captured graph of GPU work. It owns every buffer the captured work used and every kernel
/// (with its module) that it launches.
pub struct Graph {
    raw: CUgraph,
    ctx: Context,
    keep: Captured,
    /// The modules of the kernels it launches, once each, in address order: a replay holds
    /// their globals locks (read side, in this order) while it is queued, exactly as a direct
    /// launch holds its module's, so [`crate::DeviceGlobal`] access is ordered with replays too.
    modules: Vec<Arc<ModuleInner>>,
}

/// An instantiated graph, ready to replay with [`GraphExec::launch`].
pub struct GraphExec {
    raw: CUgraphExec,
    graph: Graph,
    /// Parameter values changed by [`GraphExec::set_kernel_param`], by (kernel node, parameter).
    overrides: std::collections::HashMap<(usize, usize), Vec<u8>>,
    /// The graph's kernel nodes in node order, listed once (the graph never changes after
    /// instantiation).
    kernel_nodes: std::cell::OnceCell<Vec<CUgraphNode>>,
}

// SAFETY: graph handles may be used from any thread; the driver documents graph objects as not
// thread-safe for concurrent *modification*, which `&mut self` methods rule out. The kept
// allocations and functions are Send + Sync.
unsafe impl Send for Graph {}
// SAFETY: as above.
unsafe impl Send for GraphExec {}

/// A graph capture in progress on a stream of its own. Queue work on [`Capture::stream`] (or
/// through `Deref`), then [`Capture::end`] it to get the [`Graph`]. Dropping it without `end`
/// ends the capture and discards the graph.
///
/// Clones of its stream may go to other threads: work they queue is captured too, and `end`
/// waits for enqueues in flight.
pub struct Capture {
    stream: Stream,
    ended: bool,
}

impl Context {
    /// Begins capturing into a graph, on a new stream made for this capture (see the
    /// [module docs](crate::graph)). Buffers allocated on the capture stream are made at
    /// capture time and owned by the graph once its work uses them.
    pub fn begin_capture(&self) -> Result<Capture> {
        let stream = Stream::new_capture_stream(self)?;
        {
            // No context-wide synchronize may run between counting the capture and beginning it.
            let _sync = self
                .inner
                .sync_gate
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let _w = stream.inner.gate_write();
            // SAFETY: live stream, not yet shared with anyone.
            unsafe {
                driver()?.cuStreamBeginCapture_v2(
                    stream.as_raw(),
                    CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
                )?
            };
            stream
                .inner
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .ticket = Some(crate::CaptureTicket::new());
            stream.inner.capturing.store(true, Ordering::Release);
            self.inner.captures.fetch_add(1, Ordering::AcqRel);
        }
        Ok(Capture {
            stream,
            ended: false,
        })
    }

    /// Captures what `f` queues on the capture stream it is given into a graph.
    pub fn capture(&self, f: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
        let cap = self.begin_capture()?;
        let r = f(cap.stream());
        let g = cap.end();
        r?;
        g
    }
}

impl Capture {
    /// The capture stream: work queued on it (from any thread) is recorded into the graph.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Ends the capture and returns the graph. Waits for enqueues in flight on other threads.
    pub fn end(mut self) -> Result<Graph> {
        let graph = self.finish();
        // If ending failed before the capture state changed, `Drop` tries once more.
        self.ended = graph.is_ok() || !self.stream.inner.is_capturing();
        graph
    }

    fn finish(&mut self) -> Result<Graph> {
        let inner = &self.stream.inner;
        let _w = inner.gate_write();
        let ctx = self.stream.context().clone();
        // Before the state changes: an error here leaves the capture running, and so marked.
        ctx.bind()?;
        let drv = driver()?;
        let mut keep =
            std::mem::take(&mut *inner.captured.lock().unwrap_or_else(|p| p.into_inner()));
        // The graph owns each allocation once; the set was for counting during the capture.
        keep.held = Default::default();
        keep.allocations.sort_by_key(|a| Arc::as_ptr(a) as usize);
        keep.allocations.dedup_by_key(|a| Arc::as_ptr(a) as usize);
        keep.functions.sort_by_key(|f| f.as_raw() as usize);
        keep.functions.dedup_by_key(|f| f.as_raw() as usize);
        let mut modules: Vec<Arc<ModuleInner>> =
            keep.functions.iter().map(|f| f.module().clone()).collect();
        modules.sort_by_key(|m| Arc::as_ptr(m) as usize);
        modules.dedup_by_key(|m| Arc::as_ptr(m) as usize);
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer; live stream, capturing since `begin_capture`.
        let ended = unsafe { drv.cuStreamEndCapture(self.stream.as_raw(), &mut raw) };
        // The driver has left capture mode, whatever it returned: only now may the context's
        // count of captures drop (a context-wide synchronize that slipped in while the stream
        // was still capturing would fail, and invalidate the capture).
        if inner.capturing.swap(false, Ordering::AcqRel) {
            ctx.inner.captures.fetch_sub(1, Ordering::AcqRel);
        }
        if let Err(e) = ended {
            if let Some(t) = &keep.ticket {
                t.set_discarded_unless_launched();
            }
            return Err(e.into());
        }
        if let Some(t) = &keep.ticket {
            t.set_captured();
        }
        Ok(Graph {
            raw,
            ctx,
            keep,
            modules,
        })
    }
}

impl std::ops::Deref for Capture {
    type Target = Stream;
    fn deref(&self) -> &Stream {
        &self.stream
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if !self.ended {
            // The graph (if any) is dropped right away; nothing of it ever ran.
            if let Err(e) = self.finish() {
                self.stream
                    .context()
                    .report_drop_error("ending a discarded capture", e);
            }
        }
    }
}

impl Stream {
    /// Captures what `f` queues into a graph, on a capture stream of this stream's context (see
    /// [`Context::begin_capture`]); `f` gets that stream. Replay the graph on this stream (or any
    /// other) with [`GraphExec::launch`].
    pub fn capture(&self, f: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
        self.context().capture(f)
    }
}

impl Graph {
    /// Number of nodes.
    pub fn node_count(&self) -> Result<usize> {
        Ok(self.nodes()?.len())
    }

    fn nodes(&self) -> Result<Vec<CUgraphNode>> {
        let drv = driver()?;
        let mut n = 0usize;
        // SAFETY: querying the count with a null array.
        unsafe { drv.cuGraphGetNodes(self.raw, std::ptr::null_mut(), &mut n)? };
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut v = vec![std::ptr::null_mut(); n];
        // SAFETY: the array has room for `n` nodes.
        unsafe { drv.cuGraphGetNodes(self.raw, v.as_mut_ptr(), &mut n)? };
        v.truncate(n);
        Ok(v)
    }

    fn kernel_nodes(&self) -> Result<Vec<CUgraphNode>> {
        let drv = driver()?;
        let mut out = Vec::new();
        for n in self.nodes()? {
            let mut t = CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
            // SAFETY: live node; out-pointer.
            unsafe { drv.cuGraphNodeGetType(n, &mut t)? };
            if t == CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// Instantiates the graph for launching.
    pub fn instantiate(self) -> Result<GraphExec> {
        self.ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer; live graph.
        unsafe { driver()?.cuGraphInstantiateWithFlags(&mut raw, self.raw, 0)? };
        Ok(GraphExec {
            raw,
            graph: self,
            overrides: Default::default(),
            kernel_nodes: Default::default(),
        })
    }
}

impl GraphExec {
    /// Replays the graph on `stream`, ordered after earlier uses of the buffers it touches.
    /// The stream must belong to the graph's context and must not be capturing.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        if !stream.context().same_as(&self.graph.ctx) {
            return Err(Error::DeviceMismatch {
                what: "the stream",
                expected: self.graph.ctx.device().ordinal() as i32,
                found: stream.context().device().ordinal() as i32,
            });
        }
        let _gate = stream.inner.enter();
        stream.refuse_capture("launching a graph")?;
        // Rule 3: a replay's kernels are queued under their modules' globals locks, like a direct
        // launch's, so `DeviceGlobal::read/write` (which takes the write side and then waits for
        // the context to be idle) never overlaps a replay. One global order (addresses), so two
        // replays and a global access cannot deadlock.
        // (On the stack for the usual handful of modules: a replay is a hot call.)
        let _globals: smallvec::SmallVec<[_; 4]> = self
            .graph
            .modules
            .iter()
            .map(|m| m.globals.read().unwrap_or_else(|p| p.into_inner()))
            .collect();
        self.graph.ctx.bind_cached()?;
        for a in self.graph.keep.allocations.iter() {
            a.before_use(&stream.inner)?;
        }
        // SAFETY: live handles in one context; the buffers and kernels the graph uses are owned
        // by it, and ordered on `stream` above.
        unsafe { driver()?.cuGraphLaunch(self.raw, stream.as_raw())? };
        if let Some(t) = &self.graph.keep.ticket {
            t.set_launched();
        }
        let mut first_err = Ok(());
        for a in self.graph.keep.allocations.iter() {
            // `after_use` settles the stream itself if it fails, so nothing stays untracked.
            if let Err(e) = a.after_use(&stream.inner) {
                if first_err.is_ok() {
                    first_err = Err(e);
                }
            }
        }
        first_err
    }

    /// Number of kernel nodes.
    pub fn kernel_node_count(&self) -> Result<usize> {
        Ok(self.kernel_nodes()?.len())
    }

    fn kernel_nodes(&self) -> Result<&[CUgraphNode]> {
        if let Some(n) = self.kernel_nodes.get() {
            return Ok(n);
        }
        let nodes = self.graph.kernel_nodes()?;
        Ok(self.kernel_nodes.get_or_init(|| nodes))
    }

    /// The indices (as [`GraphExec::set_kernel_param`] takes them) of the kernel nodes that
    /// launch `function`, in node order.
    pub fn kernel_nodes_launching(&self, function: &crate::Function) -> Result<Vec<usize>> {
        let drv = driver()?;
        let mut out = Vec::new();
        for (i, &node) in self.kernel_nodes()?.iter().enumerate() {
            // SAFETY: all-zero is a valid value for this C struct before the driver fills it.
            let mut p: cuda_stack_sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
            // SAFETY: live node of this graph; out-pointer.
            unsafe { drv.cuGraphKernelNodeGetParams_v2(node, &mut p)? };
            if p.func == function.as_raw() {
                out.push(i);
            }
        }
        Ok(out)
    }

    /// Changes scalar parameter `param` of the `kernel_node`-th kernel node (in the graph's node
    /// order) to `value` for later replays, where the driver allows the update.
    ///
    /// Changes made by earlier calls stay (each call applies them all again). Refused with
    /// [`Error::Unsupported`] for a kernel node whose parameters were passed through `extra`.
    ///
    /// # Safety
    /// The kernel must stay within the memory its buffer arguments describe with the new value
    /// (changing a length to a larger one can make it write out of bounds).
    pub unsafe fn set_kernel_param<T: DeviceRepr>(
        &mut self,
        kernel_node: usize,
        param: usize,
        value: T,
    ) -> Result<()> {
        let drv = driver()?;
        let nodes = self.kernel_nodes()?;
        let node = *nodes.get(kernel_node).ok_or_else(|| Error::OutOfBounds {
            op: "GraphExec::set_kernel_param (kernel node)",
            start: kernel_node,
            end: kernel_node + 1,
            len: nodes.len(),
        })?;
        // SAFETY: all-zero is a valid value for this C struct before the driver fills it.
        let mut p: cuda_stack_sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
        // SAFETY: live node; out-pointer.
        unsafe { drv.cuGraphKernelNodeGetParams_v2(node, &mut p)? };
        let mut sizes = Vec::new();
        loop {
            let (mut off, mut size) = (0usize, 0usize);
            // SAFETY: out-pointers; an index past the end is an error.
            match unsafe { drv.cuFuncGetParamInfo(p.func, sizes.len(), &mut off, &mut size) } {
                Ok(()) => sizes.push(size),
                Err(e) if e.code() == Some(CUresult::CUDA_ERROR_INVALID_VALUE) => break,
                Err(e) => return Err(e.into()),
            }
        }
        match sizes.get(param) {
            None => {
                return Err(Error::OutOfBounds {
                    op: "GraphExec::set_kernel_param (parameter)",
                    start: param,
                    end: param + 1,
                    len: sizes.len(),
                })
            }
            Some(&s) if s != std::mem::size_of::<T>() => {
                return Err(Error::SignatureMismatch {
                    kernel: "graph kernel node".into(),
                    expected: vec![std::mem::size_of::<T>()],
                    found: vec![s],
                })
            }
            Some(_) => {}
        }
        if p.func.is_null() || p.kernelParams.is_null() {
            // A node launched with `extra` (a library's captured work may be) has no
            // per-parameter array to read the other values from.
            return Err(Error::Unsupported {
                what: "GraphExec::set_kernel_param",
                why: "the kernel node passes its parameters through `extra`, not `kernelParams`"
                    .into(),
            });
        }
        // The node's parameters come from the graph (as captured); earlier changes made on this
        // executable graph are applied again, so a second call does not undo the first.
        self.overrides
            .insert((kernel_node, param), bytemuck::bytes_of(&value).to_vec());
        // SAFETY: `kernelParams` is non-null (above) and holds one pointer per parameter.
        let mut params: Vec<*mut c_void> = (0..sizes.len())
            .map(|i| unsafe { *p.kernelParams.add(i) })
            .collect();
        for ((node_i, param_i), bytes) in self.overrides.iter_mut() {
            if *node_i == kernel_node {
                if let Some(slot) = params.get_mut(*param_i) {
                    *slot = bytes.as_mut_ptr().cast();
                }
            }
        }
        p.kernelParams = params.as_mut_ptr();
        // SAFETY: live handles; every parameter pointer is valid for the call; the caller
        // vouches for the new value (see # Safety).
        unsafe { drv.cuGraphExecKernelNodeSetParams_v2(self.raw, node, &p)? };
        Ok(())
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        let raw = self.raw as usize;
        crate::host_callback::release_on_drop(
            self.graph.ctx.clone(),
            "cuGraphExecDestroy",
            move || {
                // SAFETY: live handle, destroyed once (a failed destroy leaves it live); replays
                // already queued complete first (the driver frees an in-flight executable graph when
                // it finishes).
                unsafe { driver()?.cuGraphExecDestroy(raw as CUgraphExec)? };
                Ok(())
            },
        );
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // A graph dropped without a launch (a discarded capture, say) never runs its work.
        if let Some(t) = &self.keep.ticket {
            t.set_discarded_unless_launched();
        }
        let raw = self.raw as usize;
        crate::host_callback::release_on_drop(self.ctx.clone(), "cuGraphDestroy", move || {
            // SAFETY: live handle, destroyed once (a failed destroy leaves it live).
            unsafe { driver()?.cuGraphDestroy(raw as CUgraph)? };
            Ok(())
        });
    }
}
