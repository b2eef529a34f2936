// RUN: fd-opt %s -split-input-file -fd-split-kv=report=true -verify-diagnostics -o /dev/null
// RUN: fd-opt %s -split-input-file -fd-split-kv="report=true sm-count=108" 2>&1 -o /dev/null | FileCheck %s --check-prefix=A100
// RUN: fd-opt %s -split-input-file -fd-split-kv="report=true blocks-per-sm=1" 2>&1 -o /dev/null | FileCheck %s --check-prefix=ONE-PER-SM
// RUN: fd-opt %s -split-input-file -fd-split-kv="report=true fused-merge=true" 2>&1 -o /dev/null | FileCheck %s --check-prefix=FUSED

// A wave is sm-count * blocks-per-sm blocks (4 per SM by default); the
// tensor-core blocks of these grouped heads need 19 KB in flight per SM
// (16 KB each), so fewer SMs take fewer splits (108 on an A100), and one
// block per SM is a wave of 128 whose blocks, alone, keep too little in
// flight: 16 splits.
// A100-LABEL: remark: fd-split-kv: auto: B=1 Hkv=8 Lmax=32768 -> splits=16 blocks=128 waves=1 wave-efficiency=0.30 chunk=2048 workspace=264192B
// A100: remark: fd-split-kv: auto: B=1 Hkv=1 Lmax=32768 -> splits=61 blocks=122
// ONE-PER-SM-LABEL: remark: fd-split-kv: auto: B=1 Hkv=8 Lmax=32768 -> splits=16 blocks=128 waves=1 wave-efficiency=0.97 chunk=2048 workspace=264192B
// A fused merge's last block merges every split alone: its serial tail
// grows with the split count and the block's rows (docs/SplitHeuristic.md):
// MQA's 32 rows stop at 24 splits where the merge kernel's plan takes 74.
// FUSED-LABEL: remark: fd-split-kv: auto: B=1 Hkv=8 Lmax=32768 fused-merge -> splits=19 blocks=152
// FUSED: remark: fd-split-kv: auto: B=1 Hkv=1 Lmax=32768 fused-merge -> splits=24 blocks=48

func.func @llama_decode(%q: memref<1x32x128xf16>, %k: memref<1x32768x8x128xf16>,
                        %v: memref<1x32768x8x128xf16>, %lens: memref<1xi32>,
                        %out: memref<1x32x128xf16>) {
  // expected-remark @below {{fd-split-kv: auto: B=1 Hkv=8 Lmax=32768 -> splits=19 blocks=152 waves=1 wave-efficiency=0.29 chunk=1725 workspace=313728B}}
  fd.attention %q, %k, %v, %lens into %out
      : memref<1x32x128xf16>, memref<1x32768x8x128xf16>, memref<1x32768x8x128xf16>,
        memref<1xi32> into memref<1x32x128xf16>
  return
}

// -----

// MQA: one KV head, 32 rows in two tiles of 16, a block each; with the
// merge kernel the plan takes 74 splits of 443 keys, 148 blocks: a
// tensor-core block's fixed cost (25 token-times) against its chunk at 10
// keys a token-time, where the cache's DRAM time is 62.
func.func @mqa_decode(%q: memref<1x32x128xf16>, %k: memref<1x32768x1x128xf16>,
                      %v: memref<1x32768x1x128xf16>, %lens: memref<1xi32>,
                      %out: memref<1x32x128xf16>) {
  // expected-remark @below {{fd-split-kv: auto: B=1 Hkv=1 Lmax=32768 -> splits=74 blocks=148 waves=1 wave-efficiency=0.37 chunk=443}}
  fd.attention %q, %k, %v, %lens into %out
      : memref<1x32x128xf16>, memref<1x32768x1x128xf16>, memref<1x32768x1x128xf16>,
        memref<1xi32> into memref<1x32x128xf16>
  return
}

// -----

func.func @prefill(%q: memref<1x16x8x64xf16>, %k: memref<1x4096x8x64xf16>,
                   %v: memref<1x4096x8x64xf16>, %lens: memref<1xi32>,
                   %out: memref<1x16x8x64xf16>) {
  // expected-remark @below {{fd-split-kv: left alone, prefill-shaped (Lq = 16 > 8)}}
  fd.attention %q, %k, %v, %lens into %out
      : memref<1x16x8x64xf16>, memref<1x4096x8x64xf16>, memref<1x4096x8x64xf16>,
        memref<1xi32> into memref<1x16x8x64xf16>
  return
}


// -----

func.func @window(%q: memref<1x32x128xf16>, %k: memref<1x32768x8x128xf16>,
                  %v: memref<1x32768x8x128xf16>, %lens: memref<1xi32>,
                  %out: memref<1x32x128xf16>) {
  // expected-remark @below {{fd-split-kv: auto: B=1 Hkv=8 Lmax=32768 window=4096 attended=4096 -> splits=}}
  fd.attention %q, %k, %v, %lens into %out {window_left = 4096}
      : memref<1x32x128xf16>, memref<1x32768x8x128xf16>, memref<1x32768x8x128xf16>,
        memref<1xi32> into memref<1x32x128xf16>
  return
}
