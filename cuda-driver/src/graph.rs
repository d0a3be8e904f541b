//! CUDA graphs: capture a stream's work once, replay it with one launch.

use crate::memory::Allocation;
use crate::{driver, Context, DeviceRepr, Error, Result, Stream};
use cuda_sys::{CUgraph, CUgraphExec, CUgraphNode, CUgraphNodeType, CUresult, CUstreamCaptureMode};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A captured graph of GPU work. It keeps alive every buffer the captured work used.
pub struct Graph {
    raw: CUgraph,
    ctx: Context,
    keep: Arc<Vec<Arc<Allocation>>>,
}

/// An instantiated graph, ready to replay with [`GraphExec::launch`].
pub struct GraphExec {
    raw: CUgraphExec,
    graph: Graph,
}

// SAFETY: graph handles may be used from any thread; the driver documents graph objects as not
// thread-safe for concurrent *modification*, which `&mut self` methods rule out.
unsafe impl Send for Graph {}
// SAFETY: as above.
unsafe impl Send for GraphExec {}

impl Stream {
    /// Starts capturing this stream's work into a graph (thread-local capture mode). Work queued
    /// on it until [`Stream::end_capture`] is recorded, not run. Allocate buffers before capture.
    pub fn begin_capture(&self) -> Result<()> {
        self.context().bind()?;
        // SAFETY: live stream.
        unsafe {
            driver()?.cuStreamBeginCapture_v2(
                self.as_raw(),
                CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )?
        };
        self.inner
            .captured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        if !self.inner.capturing.swap(true, Ordering::AcqRel) {
            self.context().inner.captures.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Ends the capture and returns the graph.
    pub fn end_capture(&self) -> Result<Graph> {
        if self.inner.capturing.swap(false, Ordering::AcqRel) {
            self.context().inner.captures.fetch_sub(1, Ordering::AcqRel);
        }
        let mut keep = std::mem::take(
            &mut *self
                .inner
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        keep.sort_by_key(|a| Arc::as_ptr(a) as usize);
        keep.dedup_by_key(|a| Arc::as_ptr(a) as usize);
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer; live stream.
        unsafe { driver()?.cuStreamEndCapture(self.as_raw(), &mut raw)? };
        Ok(Graph {
            raw,
            ctx: self.context().clone(),
            keep: Arc::new(keep),
        })
    }

    /// Captures what `f` queues on this stream into a graph.
    pub fn capture(&self, f: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
        self.begin_capture()?;
        let r = f(self);
        let g = self.end_capture();
        r?;
        g
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
        Ok(GraphExec { raw, graph: self })
    }
}

impl GraphExec {
    /// Replays the graph on `stream`, ordered after earlier uses of the buffers it touches.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        for a in self.graph.keep.iter() {
            a.before_use(&stream.inner)?;
        }
        // SAFETY: live handles; the buffers the graph uses are kept alive by it.
        unsafe { driver()?.cuGraphLaunch(self.raw, stream.as_raw())? };
        for a in self.graph.keep.iter() {
            a.after_use(&stream.inner)?;
        }
        Ok(())
    }

    /// Number of kernel nodes.
    pub fn kernel_node_count(&self) -> Result<usize> {
        Ok(self.graph.kernel_nodes()?.len())
    }

    /// Changes scalar parameter `param` of the `kernel_node`-th kernel node (in the graph's node
    /// order) to `value` for later replays, where the driver allows the update.
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
        let nodes = self.graph.kernel_nodes()?;
        let node = *nodes.get(kernel_node).ok_or(Error::OutOfBounds {
            op: "GraphExec::set_kernel_param (kernel node)",
            start: kernel_node,
            end: kernel_node + 1,
            len: nodes.len(),
        })?;
        // SAFETY: all-zero is a valid value for this C struct before the driver fills it.
        let mut p: cuda_sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
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
        let mut v = value;
        // SAFETY: the driver returned one pointer per parameter.
        let mut params: Vec<*mut c_void> = (0..sizes.len())
            .map(|i| unsafe { *p.kernelParams.add(i) })
            .collect();
        params[param] = (&mut v as *mut T).cast();
        p.kernelParams = params.as_mut_ptr();
        // SAFETY: live handles; every parameter pointer is valid for the call; the caller
        // vouches for the new value (see # Safety).
        unsafe { drv.cuGraphExecKernelNodeSetParams_v2(self.raw, node, &p)? };
        Ok(())
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        if let Ok(drv) = driver() {
            // SAFETY: live handle, destroyed once; replays already queued complete first.
            if let Err(e) = unsafe { drv.cuGraphExecDestroy(self.raw) } {
                self.graph
                    .ctx
                    .report_drop_error("cuGraphExecDestroy", e.into());
            }
        }
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if let Ok(drv) = driver() {
            // SAFETY: live handle, destroyed once.
            if let Err(e) = unsafe { drv.cuGraphDestroy(self.raw) } {
                self.ctx.report_drop_error("cuGraphDestroy", e.into());
            }
        }
    }
}
