// RUN: fd-opt %s -split-input-file -fd-split-kv="num-splits=3 chip=sm_80" -convert-fd-to-gpu="chip=sm_80 fuse-merge=1" -verify-diagnostics | FileCheck %s

// fuse-merge: one kernel. The host allocates the counters (int32 [B, Hkv]),
// zeroes them before the launch and frees them after; the kernel takes the
// merge's output and lse and the counters after its own parameters, and
// there is no merge kernel. Thread 0 counts the block with an acquire-
// release atomic; the block that reads S - 1 = 2 resets the counter and
// tells the others through workgroup memory; after a barrier the last
// block's warps weigh the rows' splits in the accumulators' workgroup
// memory, then sum the partials.

// CHECK-LABEL: func.func @fused
// CHECK: %[[COUNTERS:.*]] = memref.alloc(%{{.*}}) : memref<?x2xi32>
// CHECK: gpu.memset %[[COUNTERS]], %{{.*}} : memref<?x2xi32>, i32
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention
// CHECK-NOT: gpu.launch_func
// CHECK: memref.dealloc %[[COUNTERS]] : memref<?x2xi32>
// CHECK-NOT: gpu.module @fd_merge
// CHECK: gpu.func @fd_partial_attention
// CHECK-SAME: fd.params = ["query", "key_cache", "value_cache", "seq_lens", "partial_output", "partial_lse", "max_len", "output", "lse", "merge_counters"]
// CHECK: %[[COUNTED:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "atom.acq_rel.gpu.global.add.u32 $0, [$1], 1;", "=r,l" %[[COUNTER:.*]] : (!llvm.ptr<1>) -> i32
// CHECK-NEXT: %[[LAST:.*]] = arith.cmpi eq, %[[COUNTED]], %c2_i32 : i32
// CHECK-NEXT: scf.if %[[LAST]] {
// CHECK-NEXT: llvm.store %c0_i32, %[[COUNTER]] {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK: memref.store
// CHECK: gpu.barrier
// CHECK: memref.load
// CHECK: scf.if
// CHECK: memref.reinterpret_cast
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: llvm.intr.fma
// CHECK: llvm.store %{{.*}} : vector<4xf16>, !llvm.ptr<1>
// CHECK-NOT: gpu.func
func.func @fused(%q: memref<?x8x64xf16>, %k: memref<?x?x2x64xf16>,
                 %v: memref<?x?x2x64xf16>, %lens: memref<?xi32>,
                 %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  fd.attention %q, %k, %v, %lens into %out, %lse
      : memref<?x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}
