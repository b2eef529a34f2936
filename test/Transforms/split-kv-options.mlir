// RUN: fd-opt %s -split-input-file -fd-split-kv="num-splits=4 report=true" -verify-diagnostics -o /dev/null
// RUN: not fd-opt %s -split-input-file -fd-split-kv 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not fd-opt %s -split-input-file -fd-split-kv=batch=2 2>&1 | FileCheck %s --check-prefix=NOLEN
// RUN: not fd-opt %s -split-input-file -fd-split-kv=num-splits=-2 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not fd-opt %s -split-input-file -fd-split-kv="batch=1 max-len=4096 sm-count=0" 2>&1 | FileCheck %s --check-prefix=SM
// RUN: not fd-opt %s -split-input-file -fd-split-kv="num-splits=600" 2>&1 | FileCheck %s --check-prefix=OVER
// RUN: fd-opt %s -split-input-file -fd-split-kv="num-splits=600 max-splits=600" -o /dev/null

// Auto with a dynamic batch and no hint is an error that names the option.
// AUTO: error: 'fd.attention' op fd-split-kv: the batch size (B) is dynamic; pass the 'batch' option (or a fixed 'num-splits') to plan the split count
// NOLEN: error: 'fd.attention' op fd-split-kv: the cache length (Lmax) is dynamic; pass the 'max-len' option (or a fixed 'num-splits') to plan the split count
// NEG: error: 'fd.attention' op fd-split-kv: 'num-splits' must be >= 0 (0 = automatic), got -2
// SM: error: 'fd.attention' op fd-split-kv: sm-count must be >= 1, got 0
// A fixed count past the planner's cap is refused, not clamped.
// OVER: error: 'fd.attention' op fd-split-kv: num-splits 600 is over max-splits (512): at most max-splits splits (raise max-splits to allow more)

func.func @dynamic_with_hints(%q: memref<?x32x128xf16>, %k: memref<?x?x8x128xf16>,
                              %v: memref<?x?x8x128xf16>, %lens: memref<?xi32>,
                              %out: memref<?x32x128xf16>) {
  // expected-remark @below {{fd-split-kv: num-splits option: B=? Hkv=8 Lmax=? -> splits=4 workspace=66048B per sequence}}
  fd.attention %q, %k, %v, %lens into %out
      : memref<?x32x128xf16>, memref<?x?x8x128xf16>, memref<?x?x8x128xf16>,
        memref<?xi32> into memref<?x32x128xf16>
  return
}
