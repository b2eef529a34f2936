// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 -verify-diagnostics
// RUN: not fd-opt %s -split-input-file -fd-schedule-kernels -convert-fd-to-gpu=chip=sm_70 2>&1 | FileCheck %s --check-prefix=CHIP

// CHIP: error: convert-fd-to-gpu: chip 'sm_70' is not supported: expected sm_80, sm_86, sm_89, sm_90 or sm_90a

func.func @unsplit(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{convert-fd-to-gpu: split it first with fd-split-kv (num-splits=1 for the unsplit kernel)}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  return
}

// -----

// fd-split-kv leaves Lq > 8 alone: no advice to split it.
func.func @prefill(%q: memref<1x9x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x9x8x64xf16>) {
  // expected-error @below {{convert-fd-to-gpu: 9 query tokens per sequence is prefill-shaped: the GPU kernels take 1 to 8 (decode and speculative queries)}}
  fd.attention %q, %k, %v, %l into %o : memref<1x9x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x9x8x64xf16>
  return
}

// -----

func.func @strided(%po: memref<1x8x4x64xf32, strided<[4096, 512, 64, 1]>>, %pl: memref<1x8x4xf32>, %o: memref<1x8x64xf16>) {
  // expected-error @below {{convert-fd-to-gpu: operands must be contiguous memrefs (identity layout)}}
  fd.merge %po, %pl into %o : memref<1x8x4x64xf32, strided<[4096, 512, 64, 1]>>, memref<1x8x4xf32> into memref<1x8x64xf16>
  return
}

// -----

// Every op that cannot be lowered is reported, and nothing is rewritten.
func.func @both(%q: memref<1x8x64xf16>, %k: memref<1x?x8x64xf16>, %v: memref<1x?x8x64xf16>, %l: memref<1xi32>, %o: memref<1x8x64xf16>,
                %po: memref<1x8x4x64xf32, strided<[4096, 512, 64, 1]>>, %pl: memref<1x8x4xf32>) {
  // expected-error @below {{convert-fd-to-gpu: split it first with fd-split-kv}}
  fd.attention %q, %k, %v, %l into %o : memref<1x8x64xf16>, memref<1x?x8x64xf16>, memref<1x?x8x64xf16>, memref<1xi32> into memref<1x8x64xf16>
  // expected-error @below {{convert-fd-to-gpu: operands must be contiguous memrefs}}
  fd.merge %po, %pl into %o : memref<1x8x4x64xf32, strided<[4096, 512, 64, 1]>>, memref<1x8x4xf32> into memref<1x8x64xf16>
  return
}

