//! Fused scaled-dot-product attention on tensors (`torch.nn.functional.scaled_dot_product_attention`):
//! `softmax(scale · q kᵀ [+ causal mask]) v` without materialising the scores, its row
//! log-sum-exp, and the backward pass, on `cuda-stack-kernels`' `ops::attention_fwd/bwd`.
//!
//! q is `[B, H, Nq, D]`, k and v `[B, H, Nk, D]`, each any view with a contiguous last
//! dimension and non-negative strides (for example `select`/`permute` views of a packed
//! `[B, N, 3, H, D]` projection: no copy is made). The causal mask is aligned bottom-right (query
//! `i` sees key `j` iff `j <= i + Nk − Nq`, FlashAttention's convention, which a KV-cache decode
//! step needs); a query that sees no key gives an output row of 0 and `lse = −inf`.

use crate::tensor::error::{Result, TensorError};
use crate::tensor::storage::StoragePair;
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_driver::half::{bf16, f16};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::ops::{
    self, AttentionAlgo, AttentionBwdDq, AttentionGrads, AttentionInput, AttentionOutput,
    AttentionShape, HeadStrides, ATTENTION_MAX_HEAD_DIM,
};
use cuda_stack_kernels::Kernels;

/// Dtypes with fused attention kernels: `f32`, `f64`, `f16`, `bf16` (the last two computed in
/// f32). [`AttentionElement::Lse`] is the dtype of the saved row log-sum-exp: f64 for f64, f32
/// for the others. Sealed (through [`TensorElement`]).
pub trait AttentionElement: TensorElement {
    /// The log-sum-exp dtype (the kernels' compute type).
    type Lse: TensorElement;

    /// Queues `ops::attention_fwd_strided` for this dtype (automatic kernels; `out` written
    /// through its strides).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn attention_fwd(
        k: &Kernels,
        s: &Stream,
        shape: &AttentionShape,
        qkv: [(&DeviceSlice<Self>, HeadStrides); 3],
        out: (&mut DeviceSlice<Self>, HeadStrides),
        lse: &mut DeviceSlice<Self::Lse>,
        scale: f64,
    ) -> Result<()>;

    /// `ops::attention_bwd_dq_plan_strided` for this dtype (automatic kernels, automatic dq
    /// path; the gradients new dense buffers or, `packed`, one packed `[B, N, 3, H, D]` one):
    /// whether the backward adds dq atomically into an f32 workspace.
    #[doc(hidden)]
    fn attention_bwd_dq_plan(
        s: &Stream,
        shape: &AttentionShape,
        qkv: [(&DeviceSlice<Self>, HeadStrides); 3],
        dout: (&DeviceSlice<Self>, HeadStrides),
        packed: bool,
    ) -> Result<AttentionBwdDq>;

    /// Queues `ops::attention_bwd_strided` for this dtype (automatic kernels; dq as `dq_mode`
    /// says, with the f32 workspace `dq_acc` for `AttentionBwdDq::Atomic` and `Ordered`).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn attention_bwd(
        k: &Kernels,
        s: &Stream,
        shape: &AttentionShape,
        qkv: [(&DeviceSlice<Self>, HeadStrides); 3],
        out: (&DeviceSlice<Self>, HeadStrides),
        lse: &DeviceSlice<Self::Lse>,
        dout: (&DeviceSlice<Self>, HeadStrides),
        delta: &mut DeviceSlice<Self::Lse>,
        dq_mode: AttentionBwdDq,
        dq_acc: Option<&mut DeviceSlice<f32>>,
        grads: AttentionGrads<'_, Self>,
        scale: f64,
    ) -> Result<()>;
}

macro_rules! attention_element {
    ($t:ty, $lse:ty) => {
        impl AttentionElement for $t {
            type Lse = $lse;

            fn attention_fwd(
                k: &Kernels,
                s: &Stream,
                shape: &AttentionShape,
                qkv: [(&DeviceSlice<Self>, HeadStrides); 3],
                (data, strides): (&mut DeviceSlice<Self>, HeadStrides),
                lse: &mut DeviceSlice<$lse>,
                scale: f64,
            ) -> Result<()> {
                let [q, kk, v] = qkv.map(|(data, strides)| AttentionInput { data, strides });
                let out = AttentionOutput { data, strides };
                Ok(ops::attention_fwd_strided::<$t>(
                    k,
                    s,
                    AttentionAlgo::Auto,
                    shape,
                    q,
                    kk,
                    v,
                    out,
                    lse,
                    scale,
                )?)
            }

            fn attention_bwd_dq_plan(
                s: &Stream,
                shape: &AttentionShape,
                qkv: [(&DeviceSlice<Self>, HeadStrides); 3],
                (data, strides): (&DeviceSlice<Self>, HeadStrides),
                packed: bool,
            ) -> Result<AttentionBwdDq> {
                let [q, kk, v] = qkv.map(|(data, strides)| AttentionInput { data, strides });
                let dout = AttentionInput { data, strides };
                Ok(ops::attention_bwd_dq_plan_strided::<$t>(
                    s,
                    AttentionAlgo::Auto,
                    AttentionBwdDq::Auto,
                    shape,
                    &q,
                    &kk,
                    &v,
                    &dout,
                    packed,
                )?)
            }

            fn attention_bwd(
                k: &Kernels,
                s: &Stream,
                shape: &AttentionShape,
                qkv: [(&DeviceSlice<Self>, HeadStrides); 3],
                out: (&DeviceSlice<Self>, HeadStrides),
                lse: &DeviceSlice<$lse>,
                dout: (&DeviceSlice<Self>, HeadStrides),
                delta: &mut DeviceSlice<$lse>,
                dq_mode: AttentionBwdDq,
                dq_acc: Option<&mut DeviceSlice<f32>>,
                grads: AttentionGrads<'_, Self>,
                scale: f64,
            ) -> Result<()> {
                let [q, kk, v, out, dout] = [qkv[0], qkv[1], qkv[2], out, dout]
                    .map(|(data, strides)| AttentionInput { data, strides });
                Ok(ops::attention_bwd_strided::<$t>(
                    k,
                    s,
                    AttentionAlgo::Auto,
                    dq_mode,
                    shape,
                    q,
                    kk,
                    v,
                    out,
                    lse,
                    dout,
                    delta,
                    dq_acc,
                    grads,
                    scale,
                )?)
            }
        }
    };
}
attention_element!(f32, f32);
attention_element!(f64, f64);
attention_element!(f16, f32);
attention_element!(bf16, f32);

/// Checks that `t` is a rank-4 `[B, H, N, D]` view the kernels can read in place, and returns
/// its strides.
fn head_strides<T: TensorElement>(
    op: &'static str,
    what: &str,
    t: &Tensor<T>,
) -> Result<HeadStrides> {
    head_strides_of(op, what, t.shape(), t.strides())
}

/// [`head_strides`] on a shape and its strides.
fn head_strides_of(
    op: &'static str,
    what: &str,
    shape: &[usize],
    st: &[isize],
) -> Result<HeadStrides> {
    if shape.len() != 4 || st.len() != 4 {
        return Err(TensorError::InvalidArgument {
            op,
            problem: format!(
                "`{what}` must have rank 4 ([batch, heads, rows, head_dim]), but has shape \
                 {shape:?}"
            ),
        });
    }
    if shape[3] > 1 && st[3] != 1 {
        return Err(TensorError::InvalidArgument {
            op,
            problem: format!(
                "`{what}` (shape {shape:?}, strides {st:?}) must have a contiguous last dimension \
                 (stride 1); call `.contiguous()` first"
            ),
        });
    }
    // A dimension of size 1 is never stepped over, so its stride does not matter.
    let stride = |d: usize| -> Result<usize> {
        if shape[d] <= 1 {
            return Ok(0);
        }
        usize::try_from(st[d]).map_err(|_| TensorError::InvalidArgument {
            op,
            problem: format!(
                "`{what}` (shape {shape:?}, strides {st:?}) has a negative stride in dimension \
                 {d}; the attention kernels take non-negative strides (call `.contiguous()`)"
            ),
        })
    };
    Ok(HeadStrides {
        batch: stride(0)?,
        head: stride(1)?,
        row: stride(2)?,
    })
}

/// The problem's shape (with the causal flag) and the strides of q, k, v, after checking that
/// they agree and share a device.
fn check_qkv<T: TensorElement>(
    op: &'static str,
    q: &Tensor<T>,
    k: &Tensor<T>,
    v: &Tensor<T>,
    causal: bool,
) -> Result<(AttentionShape, [HeadStrides; 3])> {
    let strides = [
        head_strides(op, "q", q)?,
        head_strides(op, "k", k)?,
        head_strides(op, "v", v)?,
    ];
    q.same_device(op, k)?;
    q.same_device(op, v)?;
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if ks[0] != qs[0] || ks[1] != qs[1] || ks[3] != qs[3] {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: qs.to_vec(),
            rhs: ks.to_vec(),
            why: "`k` must have q's batch, heads and head dimension: q [B, H, Nq, D], \
                  k [B, H, Nk, D]"
                .into(),
        });
    }
    if vs != ks {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: ks.to_vec(),
            rhs: vs.to_vec(),
            why: "`v` must have k's shape [B, H, Nk, D]".into(),
        });
    }
    let d = qs[3];
    if d == 0 || d > ATTENTION_MAX_HEAD_DIM {
        return Err(TensorError::InvalidArgument {
            op,
            problem: format!(
                "head dimension D = {d} (q of shape {qs:?}) is not supported: it must be \
                 1..={ATTENTION_MAX_HEAD_DIM}"
            ),
        });
    }
    let shape = AttentionShape {
        batch: qs[0],
        heads: qs[1],
        q_len: qs[2],
        kv_len: ks[2],
        head_dim: d,
        causal,
    };
    Ok((shape, strides))
}

/// `t`'s elements from its first one to the end of its storage (what a strided view reads).
fn from_offset<T: TensorElement>(t: &Tensor<T>) -> Result<cuda_stack_driver::DeviceView<'_, T>> {
    let len = t.storage_len();
    t.storage.range(t.offset().min(len)..len)
}

/// Checks that `t` has exactly `shape` (an output or gradient the backward pass reads).
fn check_same<T: TensorElement>(
    op: &'static str,
    what: &str,
    t: &Tensor<T>,
    shape: &[usize],
) -> Result<()> {
    if t.shape() == shape {
        Ok(())
    } else {
        Err(TensorError::ShapeMismatch {
            op,
            lhs: shape.to_vec(),
            rhs: t.shape().to_vec(),
            why: format!("`{what}` must have the shape the forward pass gave it"),
        })
    }
}

impl<T: AttentionElement> Tensor<T> {
    /// `softmax(scale · self · kᵀ) · v` over the last two dimensions, with `self` the queries
    /// `[B, H, Nq, D]`, `k` and `v` `[B, H, Nk, D]`
    /// (`torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
    /// scale=scale)`), fused: the `Nq × Nk` scores are never stored. `scale` defaults to
    /// `1/√D`; `causal` masks bottom-right aligned (query `i` sees key `j ≤ i + Nk − Nq`).
    /// Returns a contiguous `[B, H, Nq, D]` tensor. See
    /// [`Tensor::scaled_dot_product_attention_forward`] for the rules on the inputs.
    pub fn scaled_dot_product_attention(
        &self,
        k: &Tensor<T>,
        v: &Tensor<T>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<Tensor<T>> {
        Ok(self
            .scaled_dot_product_attention_forward(k, v, causal, scale)?
            .0)
    }

    /// [`Tensor::scaled_dot_product_attention`] and the row log-sum-exp
    /// `lse[b, h, i] = log Σ_j exp(scale · q_i·k_j)` over the keys row `i` sees (`[B, H, Nq]`,
    /// f32, or f64 for f64 inputs; `−inf` for a row that sees no key, whose output is 0), which
    /// the backward pass needs.
    ///
    /// The inputs may be any views with a contiguous last dimension and non-negative strides;
    /// they are read in place. Errors (nothing is launched): a rank other than 4, a last-dimension
    /// stride other than 1, a negative stride, k without q's B, H, D, v without k's shape,
    /// `D == 0` or `D > 256`, tensors on different devices. Empty problems launch nothing.
    pub fn scaled_dot_product_attention_forward(
        &self,
        k: &Tensor<T>,
        v: &Tensor<T>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<(Tensor<T>, Tensor<T::Lse>)> {
        self.attention_forward(k, v, causal, scale, false)
    }

    /// [`Tensor::scaled_dot_product_attention_forward`] with the output written token-major: a
    /// contiguous `[B, Nq, H, D]` tensor (each query row's heads side by side), so that
    /// `reshape(&[B, Nq, H·D])` gives the merged heads a transformer's output projection takes
    /// and `permute(&[0, 2, 1, 3])` the `[B, H, Nq, D]` result, both without a copy. The kernels
    /// write the same values as in the `[B, H, Nq, D]` form, bit for bit; the row log-sum-exp is
    /// `[B, H, Nq]` as there. The `[B, H, Nq, D]` view can be passed as `out` to the backward
    /// ([`Tensor::scaled_dot_product_attention_backward`] reads `out` and `dout` in place).
    pub fn scaled_dot_product_attention_forward_token_major(
        &self,
        k: &Tensor<T>,
        v: &Tensor<T>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<(Tensor<T>, Tensor<T::Lse>)> {
        self.attention_forward(k, v, causal, scale, true)
    }

    /// The forward behind both public forms: `out` contiguous `[B, H, Nq, D]`, or contiguous
    /// `[B, Nq, H, D]` (`token_major`).
    fn attention_forward(
        &self,
        k: &Tensor<T>,
        v: &Tensor<T>,
        causal: bool,
        scale: Option<f64>,
        token_major: bool,
    ) -> Result<(Tensor<T>, Tensor<T::Lse>)> {
        const OP: &str = "scaled_dot_product_attention";
        let (shape, st) = check_qkv(OP, self, k, v, causal)?;
        let scale = scale.unwrap_or(1.0 / (shape.head_dim as f64).sqrt());
        let rows = self.numel() / shape.head_dim;
        let exec = self.exec()?;
        let kern = exec.kernels()?;
        let (qd, kd, vd) = (from_offset(self)?, from_offset(k)?, from_offset(v)?);
        let qkv = [(&*qd, st[0]), (&*kd, st[1]), (&*vd, st[2])];
        let (b, h, n, d) = (shape.batch, shape.heads, shape.q_len, shape.head_dim);
        let (out_st, out_shape) = if token_major {
            (HeadStrides::token_major(h, n, d), [b, n, h, d])
        } else {
            (HeadStrides::dense(h, n, d), [b, h, n, d])
        };
        // SAFETY: the forward kernel writes every element of out (B·H·Nq rows of D, through
        // strides that map them one to one onto the B·H·Nq·D elements of either layout) and of
        // lse (B·H·Nq), also for rows that see no key; the op checks both lengths.
        let (out, lse) = unsafe {
            exec.storage_pair_with::<T, T::Lse>(self.numel(), rows, |out, lse| {
                T::attention_fwd(&kern, exec.stream(), &shape, qkv, (out, out_st), lse, scale)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Ok((
            Tensor::from_storage(out, &out_shape)?,
            Tensor::from_storage(lse, &[b, h, n])?,
        ))
    }

    /// The gradients `(dq, dk, dv)` of [`Tensor::scaled_dot_product_attention`] with `self` as
    /// q, given the forward's `out` and `lse` ([`Tensor::scaled_dot_product_attention_forward`])
    /// and the output gradient `dout` (`[B, H, Nq, D]`); `causal` and `scale` must be the
    /// forward's. Recomputes the probabilities from `lse` (FlashAttention-2's backward), with
    /// no `Nq × Nk` buffer. The gradients are contiguous, shaped like q, k, v. `out` and
    /// `dout` are read in place: any `[B, H, Nq, D]` views with a contiguous last dimension and
    /// non-negative strides (for example the `permute(&[0, 2, 1, 3])` view of
    /// [`Tensor::scaled_dot_product_attention_forward_token_major`]'s output, or of a
    /// `[B, Nq, H·D]` gradient reshaped to `[B, Nq, H, D]`); other strides are errors.
    ///
    /// On the tensor cores (f16/bf16, D = 64 or 128, sm_80+) dq is computed by its own kernel
    /// (deterministic), or in the dk/dv pass into a temporary f32 buffer of
    /// `ops::attention_bwd_dq_workspace_len` elements: on sm_90 with its adds in key-tile order
    /// (deterministic too; what the shape rule picks at D ≤ 64 with 4096+ keys and at D = 128
    /// without a causal mask with 8192+ keys), or atomically
    /// (faster at most shapes; dq may then differ in its last bits from run to run, dk and dv do
    /// not; only when asked for). `cuda_stack_kernels::ops::attention_bwd_dq_choice` decides, and
    /// the environment variable `CUDA_STACK_ATTN_BWD_DQ=separate` (or `ordered`, `atomic`)
    /// forces one (`ops::ATTENTION_BWD_DQ_ENV`).
    #[allow(clippy::too_many_arguments)]
    pub fn scaled_dot_product_attention_backward(
        &self,
        k: &Tensor<T>,
        v: &Tensor<T>,
        out: &Tensor<T>,
        lse: &Tensor<T::Lse>,
        dout: &Tensor<T>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<(Tensor<T>, Tensor<T>, Tensor<T>)> {
        match self.attention_backward(k, v, out, lse, dout, causal, scale, Layout::Three)? {
            Grads::Three(dq, dk, dv) => Ok((dq, dk, dv)),
            Grads::One(_) => Err(internal("three gradients", "one tensor")),
        }
    }

    /// [`Tensor::scaled_dot_product_attention_backward`] for self-attention (`Nq == Nk`) with
    /// the three gradients in one contiguous `[3, B, H, N, D]` tensor (`dq`, `dk`, `dv` along the
    /// first dimension), written there by the kernels directly. (A packed `[B, N, 3, H, D]`
    /// projection's gradient is [`Tensor::scaled_dot_product_attention_backward_packed`], with no
    /// copy.)
    /// Errors as the three-tensor form, and when `Nq != Nk`.
    #[allow(clippy::too_many_arguments)]
    pub fn scaled_dot_product_attention_backward_stacked(
        &self,
        k: &Tensor<T>,
        v: &Tensor<T>,
        out: &Tensor<T>,
        lse: &Tensor<T::Lse>,
        dout: &Tensor<T>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<Tensor<T>> {
        match self.attention_backward(k, v, out, lse, dout, causal, scale, Layout::Stacked)? {
            Grads::One(g) => Ok(g),
            Grads::Three(..) => Err(internal("one stacked tensor", "three gradients")),
        }
    }

    /// [`Tensor::scaled_dot_product_attention_backward`] for self-attention (`Nq == Nk == N`)
    /// with the three gradients in one contiguous `[B, N, 3, H, D]` tensor (element
    /// `[b, n, 0, h, d]` is `dq[b, h, n, d]`, `1` dk's, `2` dv's), written there by the kernels
    /// directly: the gradient of a packed `[B, N, 3·H·D]` qkv projection (q, k, v each `H·D`
    /// wide, heads contiguous inside) is its `reshape(&[B, N, 3·H·D])`, with no copy. The values
    /// are those of the three-tensor form, bit for bit. Errors as the three-tensor form, and when
    /// `Nq != Nk`.
    #[allow(clippy::too_many_arguments)]
    pub fn scaled_dot_product_attention_backward_packed(
        &self,
        k: &Tensor<T>,
        v: &Tensor<T>,
        out: &Tensor<T>,
        lse: &Tensor<T::Lse>,
        dout: &Tensor<T>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<Tensor<T>> {
        match self.attention_backward(k, v, out, lse, dout, causal, scale, Layout::Packed)? {
            Grads::One(g) => Ok(g),
            Grads::Three(..) => Err(internal("one packed tensor", "three gradients")),
        }
    }

    /// The backward pass behind the public forms: the gradients as three new tensors, one
    /// `[3, B, H, N, D]` tensor or one `[B, N, 3, H, D]` tensor (`layout`; the last two need
    /// `Nq == Nk`).
    #[allow(clippy::too_many_arguments)]
    fn attention_backward(
        &self,
        k: &Tensor<T>,
        v: &Tensor<T>,
        out: &Tensor<T>,
        lse: &Tensor<T::Lse>,
        dout: &Tensor<T>,
        causal: bool,
        scale: Option<f64>,
        layout: Layout,
    ) -> Result<Grads<T>> {
        const OP: &str = "scaled_dot_product_attention_backward";
        let (shape, st) = check_qkv(OP, self, k, v, causal)?;
        let scale = scale.unwrap_or(1.0 / (shape.head_dim as f64).sqrt());
        let q_shape = [shape.batch, shape.heads, shape.q_len, shape.head_dim];
        let k_shape = [shape.batch, shape.heads, shape.kv_len, shape.head_dim];
        if layout != Layout::Three && shape.q_len != shape.kv_len {
            let (op, dims) = if layout == Layout::Packed {
                (
                    "scaled_dot_product_attention_backward_packed",
                    "[B, N, 3, H, D]",
                )
            } else {
                (
                    "scaled_dot_product_attention_backward_stacked",
                    "[3, B, H, N, D]",
                )
            };
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: q_shape.to_vec(),
                rhs: k_shape.to_vec(),
                why: format!(
                    "putting dq, dk and dv into one {dims} tensor needs as many queries as keys \
                     (Nq == Nk); use scaled_dot_product_attention_backward"
                ),
            });
        }
        check_same(OP, "out", out, &q_shape)?;
        check_same(OP, "dout", dout, &q_shape)?;
        check_same(OP, "lse", lse, &q_shape[..3])?;
        self.same_device(OP, out)?;
        self.same_device(OP, lse)?;
        self.same_device(OP, dout)?;
        // out and dout are read in place (strided views, as q, k, v); lse is the forward's dense
        // [B, H, Nq] (a copy only if the caller made it a view).
        let (o_st, do_st) = (
            head_strides(OP, "out", out)?,
            head_strides(OP, "dout", dout)?,
        );
        let lse = lse.contiguous()?;
        let q_rows = self.numel() / shape.head_dim;
        let (q_len, k_len) = (self.numel(), k.numel());
        let exec = self.exec()?;
        let kern = exec.kernels()?;
        let (qd, kd, vd) = (from_offset(self)?, from_offset(k)?, from_offset(v)?);
        let (od, ld, gd) = (from_offset(out)?, lse.dense()?, from_offset(dout)?);
        let qkv = [(&*qd, st[0]), (&*kd, st[1]), (&*vd, st[2])];
        let (o_view, do_view) = ((&*od, o_st), (&*gd, do_st));
        let packed = layout == Layout::Packed;
        // The dq path, decided before anything is allocated: the f32 workspace only for the
        // one-pass ones, atomic or ordered (which then run: dq, dk, dv and the workspace are new
        // allocations, 512-byte aligned, or 16-byte aligned thirds of one, or one packed buffer,
        // as the plan assumes).
        let mut dq_mode = T::attention_bwd_dq_plan(exec.stream(), &shape, qkv, do_view, packed)?;
        let one_pass = matches!(dq_mode, AttentionBwdDq::Atomic | AttentionBwdDq::Ordered);
        let acc_len = if one_pass {
            ops::attention_bwd_dq_workspace_len(&shape)?
        } else {
            0
        };
        if acc_len == 0 {
            // No dq to accumulate (Nq = 0), or the two-kernel path: no workspace either way.
            dq_mode = AttentionBwdDq::Separate;
        }
        // Queues the backward into the gradient buffers (the delta and dq workspaces are made
        // inside).
        let run = |grads: AttentionGrads<'_, T>| {
            // SAFETY: the delta kernel writes every element of its workspace before the others
            // read it, and the one-pass paths zero every element of the dq workspace first (they
            // run whenever that workspace is made: acc_len > 0 only for a planned Atomic or
            // Ordered, which the op then runs or refuses with an error).
            unsafe {
                let _delta = exec.storage_with::<T::Lse>(q_rows, |delta| {
                    let bwd = |acc: Option<&mut DeviceSlice<f32>>| {
                        T::attention_bwd(
                            &kern,
                            exec.stream(),
                            &shape,
                            qkv,
                            o_view,
                            &ld,
                            do_view,
                            delta,
                            dq_mode,
                            acc,
                            grads,
                            scale,
                        )
                    };
                    if acc_len == 0 {
                        return bwd(None);
                    }
                    let _acc = exec.storage_with::<f32>(acc_len, |acc| bwd(Some(acc)))?;
                    Ok(())
                })?;
            }
            Ok(())
        };
        if layout == Layout::Packed {
            // SAFETY: the dq kernel (or the atomic path's conversion) writes every element of
            // dq's view (B·H·N rows of D), the dk/dv (or fused) kernel every element of dk's and
            // dv's, also for rows that see no query or key; the three views of the packed
            // [B, N, 3, H, D] buffer together cover each of its elements once. The op checks the
            // length.
            let all = unsafe {
                exec.storage_with::<T>(3 * q_len, |all| run(AttentionGrads::PackedQkv(all)))
            }
            .map_err(|e| e.with_shape(self.shape()))?;
            let (b, h, n, d) = (shape.batch, shape.heads, shape.q_len, shape.head_dim);
            return Ok(Grads::One(Tensor::from_storage(all, &[b, n, 3, h, d])?));
        }
        if layout == Layout::Stacked {
            // SAFETY: the dq kernel (or the atomic path's conversion) writes every element of
            // dq (B·H·Nq rows of D), the dk/dv (or fused) kernel every element of dk and dv
            // (B·H·Nk rows of D), also for rows that see no query or key; with Nq == Nk the three
            // are the buffer's three thirds, so every element is written. The op checks every
            // length.
            let all = unsafe {
                exec.storage_with::<T>(3 * q_len, |all| {
                    let (mut dq, mut rest) = all.split_at_mut(q_len)?;
                    let (mut dk, mut dv) = rest.split_at_mut(k_len)?;
                    run(AttentionGrads::dense(&shape, &mut dq, &mut dk, &mut dv))
                })
            }
            .map_err(|e| e.with_shape(self.shape()))?;
            let mut stacked_shape = vec![3];
            stacked_shape.extend_from_slice(&q_shape);
            return Ok(Grads::One(Tensor::from_storage(all, &stacked_shape)?));
        }
        let mut kv: Option<StoragePair<T, T>> = None;
        // SAFETY: the dq kernel (or the atomic path's conversion) writes every element of dq
        // (B·H·Nq rows of D), the dk/dv (or fused) kernel every element of dk and dv (B·H·Nk rows
        // of D), also for rows that see no query or key. The op checks every length.
        // The storages are made by nested `storage_*_with` calls so that one op call sees all
        // the buffers.
        let dq = unsafe {
            exec.storage_with::<T>(q_len, |dq| {
                let pair = exec.storage_pair_with::<T, T>(k_len, k_len, |dk, dv| {
                    run(AttentionGrads::dense(&shape, dq, dk, dv))
                })?;
                kv = Some(pair);
                Ok(())
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        let (dk, dv) = kv.ok_or_else(|| internal("the dk/dv storages", "none"))?;
        Ok(Grads::Three(
            Tensor::from_storage(dq, &q_shape)?,
            Tensor::from_storage(dk, &k_shape)?,
            Tensor::from_storage(dv, &k_shape)?,
        ))
    }
}

/// The backward's gradients: three tensors, or one `[3, B, H, N, D]` or `[B, N, 3, H, D]`
/// tensor.
enum Grads<T: TensorElement> {
    /// dq, dk, dv.
    Three(Tensor<T>, Tensor<T>, Tensor<T>),
    /// dq, dk, dv in one tensor ([`Layout::Stacked`] or [`Layout::Packed`]).
    One(Tensor<T>),
}

/// The layout the backward writes its gradients in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Three contiguous tensors shaped like q, k, v.
    Three,
    /// One contiguous `[3, B, H, N, D]` tensor.
    Stacked,
    /// One contiguous `[B, N, 3, H, D]` tensor (a packed qkv projection's gradient).
    Packed,
}

/// An internal inconsistency of the backward (never expected), as a typed error.
fn internal(wanted: &str, got: &str) -> TensorError {
    TensorError::InvalidArgument {
        op: "scaled_dot_product_attention_backward",
        problem: format!("internal error: wanted {wanted}, made {got}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_and_dout_strides_are_checked() {
        const OP: &str = "scaled_dot_product_attention_backward";
        // A [B, H, N, D] view of a [B, N, H, D] array: read in place.
        let st = head_strides_of(OP, "out", &[2, 3, 5, 8], &[120, 8, 24, 1]);
        assert!(matches!(
            st,
            Ok(HeadStrides {
                batch: 120,
                head: 8,
                row: 24
            })
        ));
        for what in ["out", "dout"] {
            // A negative stride (a flipped view), a non-unit last stride, a wrong rank.
            let bad: [(&[usize], &[isize]); 3] = [
                (&[2, 3, 5, 8], &[120, 8, -24, 1]),
                (&[2, 3, 5, 8], &[240, 16, 48, 2]),
                (&[6, 5, 8], &[40, 8, 1]),
            ];
            for (shape, strides) in bad {
                let r = head_strides_of(OP, what, shape, strides);
                match r {
                    Err(TensorError::InvalidArgument { problem, .. }) => {
                        assert!(problem.contains(what), "{problem}")
                    }
                    other => panic!("{what} {shape:?} {strides:?}: {other:?}"),
                }
            }
        }
        // Size-1 dimensions may have any stride.
        assert!(head_strides_of(OP, "dout", &[1, 1, 1, 1], &[-5, -3, -1, 7]).is_ok());
    }
}
