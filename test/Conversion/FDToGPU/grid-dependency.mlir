// RUN: fd-opt %s -fd-split-kv="num-splits=3 chip=sm_90" -convert-fd-to-gpu=chip=sm_90 | FileCheck %s
// RUN: fd-opt %s -fd-split-kv="num-splits=3 chip=sm_90a" -convert-fd-to-gpu=chip=sm_90a | FileCheck %s
// RUN: fd-opt %s -fd-split-kv="num-splits=3 chip=sm_90" -convert-fd-to-gpu="chip=sm_90 fuse-merge=1" | FileCheck %s --check-prefix=FUSED
// RUN: fd-opt %s -fd-split-kv="num-splits=3 chip=sm_89" -convert-fd-to-gpu=chip=sm_89 | FileCheck %s --check-prefix=OLDER
// RUN: fd-opt %s -fd-split-kv="num-splits=3 chip=sm_80" -convert-fd-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=OLDER
// The default chip (sm_90) takes part.
// RUN: fd-opt %s -fd-split-kv="num-splits=3" -convert-fd-to-gpu | FileCheck %s

// Programmatic dependent launch on sm_90: each kernel first waits for the
// grid before it on the stream (which may have written anything it reads),
// then lets the grid after it launch, and says so (fd.programmatic_launch:
// the manifest's programmatic_launch). Before sm_90 there is no
// griddepcontrol.

// CHECK-LABEL: gpu.module @fd_partial_attention
// CHECK: gpu.func @fd_partial_attention
// CHECK-SAME: fd.programmatic_launch
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NOT: nvvm.griddepcontrol
// CHECK-LABEL: gpu.module @fd_merge
// CHECK: gpu.func @fd_merge
// CHECK-SAME: fd.programmatic_launch
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NOT: nvvm.griddepcontrol

// FUSED: gpu.func @fd_partial_attention
// FUSED-SAME: fd.programmatic_launch
// FUSED-NEXT: nvvm.griddepcontrol wait
// FUSED-NEXT: nvvm.griddepcontrol launch_dependents
// FUSED-NOT: nvvm.griddepcontrol
// FUSED-NOT: gpu.func

// OLDER-NOT: fd.programmatic_launch
// OLDER-NOT: nvvm.griddepcontrol
func.func @attention(%q: memref<?x8x64xf16>, %k: memref<?x?x2x64xf16>,
                     %v: memref<?x?x2x64xf16>, %lens: memref<?xi32>,
                     %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>) {
  fd.attention %q, %k, %v, %lens into %out, %lse
      : memref<?x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}
