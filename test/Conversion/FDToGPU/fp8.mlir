// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_90 -convert-fd-to-gpu=chip=sm_90 | FileCheck %s --check-prefixes=CHECK,CVT
// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s --check-prefixes=CHECK,BITS

// FP8 caches on the GPU: the partial kernel takes k_scale and v_scale after
// its other parameters and decodes the cache to f16 pairs, with cvt on
// sm_90 and bit operations (a byte permute, the E4M3 magnitude shifted
// into an f16, times 2^8 folded into the scales) on the others. Per tensor,
// the key scale joins q's prescale and the value scale the normalization,
// both loaded once, before any key.

// CHECK-LABEL: func.func @tensor_scales
// CHECK: gpu.func @fd_partial_attention({{.*}}, %[[KS:.*]]: !llvm.ptr<1>, %[[VS:.*]]: !llvm.ptr<1>) workgroup({{.*}}) kernel attributes {fd.math_units = "tensor_cores", fd.params = ["query", "key_cache", "value_cache", "seq_lens", "partial_output", "partial_lse", "max_len", "k_scale", "v_scale"]
// CVT-DAG: %[[PRESCALE:.*]] = arith.constant 0.180336878 : f32
// BITS-DAG: %[[PRESCALE:.*]] = arith.constant 46.1662407 : f32
// BITS-DAG: %[[FACTOR:.*]] = arith.constant 2.560000e+02 : f32
// CHECK: %[[K:.*]] = llvm.load %[[KS]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[SCORE_SCALE:.*]] = arith.mulf %[[K]], %[[PRESCALE]] : f32
// CHECK: %[[V:.*]] = llvm.load %[[VS]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// BITS: %[[OUTPUT_SCALE:.*]] = arith.mulf %[[V]], %[[FACTOR]] : f32
// Tensor cores copy 8 bytes (8 elements) a vector through shared memory.
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 8, cache =  ca, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xi32>
// CVT: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// BITS-NOT: nvvm.convert
// BITS: llvm.shufflevector %{{.*}}, %{{.*}} [4, 0, 5, 1] : vector<4xi8>
// BITS: arith.andi %{{.*}}, %{{.*}} : i32
// CHECK: nvvm.mma.sync
// CHECK: arith.mulf %{{.*}}, %[[SCORE_SCALE]] : f32
// CHECK: arith.divf
// CVT-NEXT: arith.mulf %{{.*}}, %[[V]] : f32
// BITS-NEXT: arith.mulf %{{.*}}, %[[OUTPUT_SCALE]] : f32
func.func @tensor_scales(%q: memref<?x4x64xf16>, %k: memref<?x?x1x64xf8E4M3FN>, %v: memref<?x?x1x64xf8E4M3FN>, %l: memref<?xi32>,
                         %ks: memref<1xf32>, %vs: memref<1xf32>, %po: memref<?x4x2x64xf32>, %pl: memref<?x4x2xf32>) {
  fd.partial_attention %q, %k, %v, %l k_scale %ks : memref<1xf32> v_scale %vs : memref<1xf32> into %po, %pl
      : memref<?x4x64xf16>, memref<?x?x1x64xf8E4M3FN>, memref<?x?x1x64xf8E4M3FN>, memref<?xi32> into memref<?x4x2x64xf32>, memref<?x4x2xf32>
  return
}

// -----

// Per token and KV head (one head per token group of CUDA cores): each
// step loads its keys' scales beside their 16-element vectors; the key
// scale multiplies the score, the value scale the weight of the value (the
// sum takes the unscaled weight). E5M2 is an f16's high byte: a byte
// permute, nothing more, without cvt.

// CHECK-LABEL: func.func @token_scales
// CHECK: gpu.func @fd_partial_attention({{.*}}, %[[KS:.*]]: !llvm.ptr<1>, %[[VS:.*]]: !llvm.ptr<1>) workgroup({{.*}}) kernel attributes {fd.math_units = "cuda_cores"
// CHECK: scf.for
// CHECK: %[[KADDR:.*]] = llvm.getelementptr %[[KS]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: %[[KSCALE:.*]] = llvm.load %[[KADDR]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[VADDR:.*]] = llvm.getelementptr %[[VS]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: %[[VSCALE:.*]] = llvm.load %[[VADDR]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CVT: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E5M2) -> vector<2xf16>
// BITS-NOT: nvvm.convert
// BITS: %[[HIGH:.*]] = llvm.shufflevector %{{.*}}, %{{.*}} [4, 0, 5, 1] : vector<4xi8>
// BITS-NEXT: llvm.bitcast %[[HIGH]] : vector<4xi8> to vector<2xf16>
// CHECK: gpu.shuffle xor
// CHECK: arith.mulf %{{.*}}, %[[KSCALE]] : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK: %[[EXP:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK-NEXT: %[[WEIGHT:.*]] = arith.select %{{.*}}, %[[EXP]], %{{.*}} : f32
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %[[WEIGHT]] : f32
// CHECK: arith.mulf %[[WEIGHT]], %[[VSCALE]] : f32
func.func @token_scales(%q: memref<?x2x64xbf16>, %k: memref<?x?x2x64xf8E5M2>, %v: memref<?x?x2x64xf8E5M2>, %l: memref<?xi32>,
                        %ks: memref<?x?x2xf32>, %vs: memref<?x?x2xf32>, %po: memref<?x2x2x64xf32>, %pl: memref<?x2x2xf32>) {
  fd.partial_attention %q, %k, %v, %l k_scale %ks : memref<?x?x2xf32> v_scale %vs : memref<?x?x2xf32> into %po, %pl
      : memref<?x2x64xbf16>, memref<?x?x2x64xf8E5M2>, memref<?x?x2x64xf8E5M2>, memref<?xi32> into memref<?x2x2x64xf32>, memref<?x2x2xf32>
  return
}

// -----

// Per token and KV head on tensor cores: each lane copies its two keys'
// scales (4 bytes each) beside their 8-byte vectors, the key scales with
// the K, the value scales with the V, and reads each pair back as one
// 8-byte load once its group is in: the key scales multiply the scores,
// the value scales P.

// CHECK-LABEL: func.func @tensor_core_token_scales
// CHECK: gpu.func @fd_partial_attention({{.*}}, %[[KS:.*]]: !llvm.ptr<1>, %[[VS:.*]]: !llvm.ptr<1>) workgroup({{.*}}) kernel attributes {fd.math_units = "tensor_cores"
// CHECK: scf.for
// The next step's V and value scales, then a wait for this step's K.
// CHECK: %[[VADDR:.*]] = llvm.getelementptr %[[VS]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %[[VADDR]], 4, cache =  ca, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 3
// CHECK: %[[KPAIR:.*]] = llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK: llvm.extractelement %[[KPAIR]]
// CHECK: nvvm.mma.sync
// The K and key scales of the step after next.
// CHECK: %[[KADDR:.*]] = llvm.getelementptr %[[KS]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %[[KADDR]], 4, cache =  ca, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.wait.group 3
// CHECK: %[[VPAIR:.*]] = llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK: llvm.extractelement %[[VPAIR]]
// CHECK: nvvm.mma.sync
func.func @tensor_core_token_scales(%q: memref<?x4x64xf16>, %k: memref<?x?x1x64xf8E4M3FN>, %v: memref<?x?x1x64xf8E4M3FN>, %l: memref<?xi32>,
                         %ks: memref<?x?x1xf32>, %vs: memref<?x?x1xf32>, %po: memref<?x4x2x64xf32>, %pl: memref<?x4x2xf32>) {
  fd.partial_attention %q, %k, %v, %l k_scale %ks : memref<?x?x1xf32> v_scale %vs : memref<?x?x1xf32> into %po, %pl
      : memref<?x4x64xf16>, memref<?x?x1x64xf8E4M3FN>, memref<?x?x1x64xf8E4M3FN>, memref<?xi32> into memref<?x4x2x64xf32>, memref<?x4x2xf32>
  return
}

// -----

// A head dim that is not a multiple of 16 (rows 8-byte aligned): 8-byte
// vectors of 8 elements.

// CHECK-LABEL: func.func @eight_byte_rows
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xi32>
// CHECK-NOT: vector<4xi32>
// CHECK: gpu.return
func.func @eight_byte_rows(%q: memref<?x1x40xf16>, %k: memref<?x?x1x40xf8E4M3FN>, %v: memref<?x?x1x40xf8E4M3FN>, %l: memref<?xi32>,
                           %ks: memref<1xf32>, %vs: memref<1xf32>, %po: memref<?x1x2x40xf32>, %pl: memref<?x1x2xf32>) {
  fd.partial_attention %q, %k, %v, %l k_scale %ks : memref<1xf32> v_scale %vs : memref<1xf32> into %po, %pl
      : memref<?x1x40xf16>, memref<?x?x1x40xf8E4M3FN>, memref<?x?x1x40xf8E4M3FN>, memref<?xi32> into memref<?x1x2x40xf32>, memref<?x1x2xf32>
  return
}

// -----

// bf16 queries over an fp8 cache with one scale on the per-warp tile
// multiply in f16: the staged q fragments are read back (the tile's largest
// finite |q|, a warp's max), rewritten as f16 pairs times 2^k after a
// barrier, and the scores take 2^-k with the prescale; the cache decodes
// to f16 pairs (sm_90: one cvt a pair) and every mma is f16.

// CHECK-LABEL: func.func @bf16_queries_multiply_in_half
// CHECK: %[[K:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[PRESCALE:.*]] = arith.mulf %[[K]], %{{.*}} : f32
// CHECK: arith.andi %{{.*}}, %{{.*}} : i32
// CHECK: llvm.fpext %{{.*}} : vector<2xbf16> to vector<2xf32>
// CHECK: arith.cmpf olt, %{{.*}}, %{{.*}} : f32
// CHECK: arith.maximumf
// CHECK: gpu.shuffle xor
// CHECK: llvm.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT: arith.subi
// CHECK-NEXT: arith.addi
// CHECK-NEXT: arith.shli
// CHECK-NEXT: %[[INVERSE:.*]] = llvm.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT: gpu.barrier
// CHECK: llvm.fptrunc %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: memref.store
// CHECK: gpu.barrier
// CHECK: %[[SCORE_SCALE:.*]] = arith.mulf %[[PRESCALE]], %[[INVERSE]] : f32
// CHECK: scf.for
// CVT: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK-NOT: vector<2xbf16>
// CHECK: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK-NOT: vector<2xbf16>
// CHECK: arith.mulf %{{.*}}, %[[SCORE_SCALE]] : f32
// CHECK-NOT: vector<2xbf16>
// CHECK: gpu.return
func.func @bf16_queries_multiply_in_half(%q: memref<?x4x128xbf16>, %k: memref<?x?x1x128xf8E4M3FN>, %v: memref<?x?x1x128xf8E4M3FN>, %l: memref<?xi32>,
                                        %ks: memref<1xf32>, %vs: memref<1xf32>, %po: memref<?x4x2x128xf32>, %pl: memref<?x4x2xf32>) {
  fd.partial_attention %q, %k, %v, %l k_scale %ks : memref<1xf32> v_scale %vs : memref<1xf32> into %po, %pl
      : memref<?x4x128xbf16>, memref<?x?x1x128xf8E4M3FN>, memref<?x?x1x128xf8E4M3FN>, memref<?xi32> into memref<?x4x2x128xf32>, memref<?x4x2xf32>
  return
}
