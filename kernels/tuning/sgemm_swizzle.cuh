// Prepended (after dtype.cuh, before sgemm.cu's text) by kernel_lab to try a grouped block order
// for the SGEMM: SWZ_G rows of output tiles are walked column by column, so the A and B panels a
// wave of blocks reads are shared in L2. `blockIdx` is redefined for the text that follows.
__device__ __forceinline__ uint3 swz_block() {
    const unsigned gx = gridDim.x, gy = gridDim.y;
    const unsigned lin = blockIdx.y * gx + blockIdx.x;
    const unsigned per_group = SWZ_G * gx;
    const unsigned group = lin / per_group, first = group * SWZ_G;
    const unsigned rows_in = min((unsigned)SWZ_G, gy - first);
    const unsigned in_group = lin % per_group;
    return make_uint3(in_group / rows_in, first + in_group % rows_in, 0);
}
#define blockIdx swz_block()
