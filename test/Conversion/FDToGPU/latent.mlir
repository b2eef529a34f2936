// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_90 -convert-fd-to-gpu=chip=sm_90 | FileCheck %s

// MLA's absorbed decode on the split-value tensor-core tile: keys 576 wide,
// the values the latent cache's first 512 columns. The partial kernel takes
// no value cache; its warps exchange their shares of S (4 x 32 lanes x 4),
// publish one state (19 rows of 512: the four stages of 8 latent rows take
// its place) and do 9 m16n8k16 k-steps (three chains from zero) and 16
// m16n8k8 output tiles each a step, the block copying the keys with
// cp.async before the P V tiles; the accumulators are rescaled only when
// the warp's vote says a row raised its max; the partial rows are
// written four values a thread (16-byte loads and stores); the merge writes
// each 512-wide row an element a thread (512 threads).

// CHECK-LABEL: func.func @latent
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in ({{.*}}) threads in (%c128{{.*}}) args({{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : !llvm.ptr<1>, {{.*}} : i32)
// CHECK: gpu.launch_func @fd_merge::@fd_merge {{.*}} threads in (%c512,
// CHECK: gpu.func @fd_partial_attention({{.*}}) workgroup(%{{.*}} : memref<4x32x4xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<1x19x512xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<1x16x2xf32, #gpu.address_space<workgroup>>
// CHECK-SAME: fd.params = ["query", "key_cache", "seq_lens", "partial_output", "partial_lse", "max_len"]
// q's 16 rows copied first (72 pieces each, one group), before the
// sequence's length is loaded; once they are in, each warp reads its 18
// fragment words from shared memory, then steps 0 to 2 are copied (into
// any stage: every warp has read q).
// CHECK: scf.for %{{.*}} = %thread_id_x to %c1152 step %c128
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: nvvm.cp.async.commit.group
// CHECK-NOT: nvvm.cp.async
// CHECK: llvm.load {{.*}} : !llvm.ptr<1> -> i32
// CHECK-NOT: nvvm.cp.async
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-18: llvm.load {{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xi32>
// CHECK-NOT: nvvm.cp.async
// CHECK: gpu.barrier
// CHECK-COUNT-3: nvvm.cp.async.commit.group
// CHECK-NOT: nvvm.cp.async
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 2
// CHECK-COUNT-3: C[%[[ZERO:cst[_0-9]*]], %[[ZERO]], %[[ZERO]], %[[ZERO]]] {{.*}} k = 16
// CHECK-COUNT-6: C[%{{[0-9]+}}, {{.*}} k = 16
// CHECK-NOT: shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK: gpu.barrier
// CHECK: %[[RAISED:.*]] = nvvm.vote.sync  any %c-1_i32, %{{.*}} -> i1
// CHECK-NOT: nvvm.mma.sync
// CHECK: nvvm.cp.async.commit.group
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.if %[[RAISED]] -> (f32,
// CHECK-COUNT-64: arith.mulf
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %arg
// CHECK-COUNT-16: shape = #nvvm.shape<m = 16, n = 8, k = 8>
// CHECK-NOT: nvvm.mma.sync
// The last 3 steps copy nothing (past the chunk): their loop commits
// empty groups, so the drain after it waits for no copy.
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 2
// CHECK-COUNT-9: shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK-COUNT-16: shape = #nvvm.shape<m = 16, n = 8, k = 8>
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xf32>
// CHECK: llvm.intr.fma({{.*}}) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
// CHECK: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK: gpu.func @fd_merge
// CHECK-SAME: known_block_size = array<i32: 512, 1, 1>
// CHECK-NOT: vector<2xf32>
// CHECK: llvm.load {{.*}} -> f32
// CHECK-NOT: vector<2xf32>
// CHECK: llvm.store {{.*}} : bf16, !llvm.ptr<1>
func.func @latent(%q: memref<2x16x576xbf16>, %kv: memref<2x?x1x576xbf16>,
                  %lens: memref<2xi32>, %po: memref<2x16x4x512xf32>,
                  %pl: memref<2x16x4xf32>, %out: memref<2x16x512xbf16>) {
  fd.partial_attention %q, %kv, %lens into %po, %pl
      : memref<2x16x576xbf16>, memref<2x?x1x576xbf16>, memref<2xi32>
        into memref<2x16x4x512xf32>, memref<2x16x4xf32>
  fd.merge %po, %pl into %out : memref<2x16x4x512xf32>, memref<2x16x4xf32>
      into memref<2x16x512xbf16>
  return
}

// -----

// Values apart from keys: D 192 / D_v 128, on the split-value tile. A stage
// row holds K then V; the value cache is read with a row stride of 128 and
// the partials are 128 wide.

// CHECK-LABEL: func.func @apart
// CHECK: gpu.func @fd_partial_attention({{.*}}) workgroup(%{{.*}} : memref<4x32x4xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<1x42x128xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<1x4x2xf32, #gpu.address_space<workgroup>>
// CHECK-SAME: fd.params = ["query", "key_cache", "value_cache", "seq_lens", "partial_output", "partial_lse", "max_len"]
// CHECK: arith.muli %{{.*}}, %c128 : index
// CHECK: gpu.func @fd_merge
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
func.func @apart(%q: memref<2x8x192xf16>, %k: memref<2x?x2x192xf16>,
                 %v: memref<2x?x2x128xf16>, %lens: memref<2xi32>,
                 %po: memref<2x8x4x128xf32>, %pl: memref<2x8x4xf32>,
                 %out: memref<2x8x128xf16>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl
      : memref<2x8x192xf16>, memref<2x?x2x192xf16>, memref<2x?x2x128xf16>,
        memref<2xi32> into memref<2x8x4x128xf32>, memref<2x8x4xf32>
  fd.merge %po, %pl into %out : memref<2x8x4x128xf32>, memref<2x8x4xf32>
      into memref<2x8x128xf16>
  return
}

// -----

// bf16 queries over an e4m3 latent cache with one scale multiply in f16:
// each warp's largest |q| (sign bits cleared, reduced with xor shuffles)
// meets the others' through the score exchange, q's 36 words a lane become
// f16 pairs times that power of two before the loop, and each step decodes
// its 34 pairs a lane with one cvt each into f16 mma operands.

// CHECK-LABEL: func.func @latent_e4m3
// CHECK: gpu.func @fd_partial_attention
// CHECK: arith.andi %{{.*}}, %c2147450879_i32 : i32
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK-COUNT-36: llvm.fptrunc {{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: scf.for
// CHECK-COUNT-34: nvvm.convert.f8x2.to.f16x2
// CHECK-NOT: nvvm.cp.async.wait.group 0
// CHECK: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)
func.func @latent_e4m3(%q: memref<2x16x576xbf16>,
                       %kv: memref<2x?x1x576xf8E4M3FN>, %lens: memref<2xi32>,
                       %ks: memref<1xf32>, %po: memref<2x16x4x512xf32>,
                       %pl: memref<2x16x4xf32>) {
  fd.partial_attention %q, %kv, %lens k_scale %ks : memref<1xf32>
      into %po, %pl
      : memref<2x16x576xbf16>, memref<2x?x1x576xf8E4M3FN>, memref<2xi32>
        into memref<2x16x4x512xf32>, memref<2x16x4xf32>
  return
}

// -----

// Per-token scales go into P, which f16 could not hold for large values:
// there the pairs are bf16, decoded by integer operations and a bf16
// multiply.

// CHECK-LABEL: func.func @latent_e4m3_token_scales
// CHECK: gpu.func @fd_partial_attention
// CHECK-NOT: llvm.fptrunc {{.*}} to vector<2xf16>
// CHECK: scf.for
// CHECK: arith.mulf {{.*}} : vector<2xbf16>
// CHECK-NOT: nvvm.convert.f8x2.to.f16x2
// CHECK: nvvm.mma.sync {{.*}} : (i32, i32, f32)
func.func @latent_e4m3_token_scales(%q: memref<2x16x576xbf16>,
                       %kv: memref<2x?x1x576xf8E4M3FN>, %lens: memref<2xi32>,
                       %ks: memref<2x?x1xf32>, %po: memref<2x16x4x512xf32>,
                       %pl: memref<2x16x4xf32>) {
  fd.partial_attention %q, %kv, %lens k_scale %ks : memref<2x?x1xf32>
      into %po, %pl
      : memref<2x16x576xbf16>, memref<2x?x1x576xf8E4M3FN>, memref<2xi32>
        into memref<2x16x4x512xf32>, memref<2x16x4xf32>
  return
}
