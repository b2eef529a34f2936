// RUN: fd-opt %s -split-input-file -fd-split-kv | FileCheck %s
// RUN: fd-opt %s -split-input-file -fd-split-kv=num-splits=1 | FileCheck %s --check-prefix=ONE
// RUN: fd-opt %s -split-input-file -fd-split-kv="num-splits=4 chunk-length=512" | FileCheck %s --check-prefix=CHUNK

// Llama-3-8B decode step at 32k: 8 blocks unsplit; its 4 rows per KV head
// go to tensor cores, whose blocks stream a chunk far faster than DRAM
// delivers it, so the plan is the fewest splits whose blocks keep enough
// bytes in flight for DRAM's rate: 19 (152 blocks).
// Workspace: 1 * 1 * 32 * 19 * (128 + 1) * 4 = 313728 bytes, the lse part
// at 32 * 19 * 128 * 4 = 311296.

// CHECK-LABEL: func @llama_decode
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: memref<1x32x128xf16>, %[[K:[a-z0-9]+]]: memref<1x32768x8x128xf16>, %[[V:[a-z0-9]+]]: memref<1x32768x8x128xf16>, %[[L:[a-z0-9]+]]: memref<1xi32>, %[[O:[a-z0-9]+]]: memref<1x32x128xf16>, %[[LSE:[a-z0-9]+]]: memref<1x32xf32>)
// CHECK-DAG:  %[[OFF:.*]] = arith.constant 311296 : index
// CHECK-DAG:  %[[C0:.*]] = arith.constant 0 : index
// CHECK:      %[[WS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<313728xi8>
// CHECK-NEXT: %[[PO:.*]] = memref.view %[[WS]][%[[C0]]][] : memref<313728xi8> to memref<1x32x19x128xf32>
// CHECK-NEXT: %[[PL:.*]] = memref.view %[[WS]][%[[OFF]]][] : memref<313728xi8> to memref<1x32x19xf32>
// CHECK-NEXT: fd.partial_attention %[[Q]], %[[K]], %[[V]], %[[L]] into %[[PO]], %[[PL]] {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 4, row_tiles = 1, threads = 128, min_blocks_per_sm = 4, held_query_steps = 2, stages = 2>} :
// CHECK-NEXT: fd.merge %[[PO]], %[[PL]] into %[[O]], %[[LSE]] :
// CHECK-NEXT: memref.dealloc %[[WS]]
// CHECK-NOT:  fd.attention

// ONE-LABEL: func @llama_decode
// ONE: memref.view {{.*}} to memref<1x32x1x128xf32>
// ONE: fd.partial_attention {{.*}} into memref<1x32x1x128xf32>, memref<1x32x1xf32>
// ONE: fd.merge

// CHUNK-LABEL: func @llama_decode
// CHUNK: fd.partial_attention {{.*}} {chunk_length = 512 : i64, schedule = #fd.schedule<{{[^>]+}}>} : {{.*}} into memref<1x32x4x128xf32>, memref<1x32x4xf32>
func.func @llama_decode(%q: memref<1x32x128xf16>, %k: memref<1x32768x8x128xf16>,
                        %v: memref<1x32768x8x128xf16>, %lens: memref<1xi32>,
                        %out: memref<1x32x128xf16>, %lse: memref<1x32xf32>) {
  fd.attention %q, %k, %v, %lens into %out, %lse
      : memref<1x32x128xf16>, memref<1x32768x8x128xf16>, memref<1x32768x8x128xf16>,
        memref<1xi32> into memref<1x32x128xf16>, memref<1x32xf32>
  return
}

// -----

// A large batch fills the machine without splitting; layout, scale and the
// absent lse carry over.

// CHECK-LABEL: func @full_grid_hnd
// CHECK: fd.partial_attention {{.*}} {kv_layout = #fd.kv_layout<HND>, scale = 2.500000e-01 : f32, schedule = #fd.schedule<{{[^>]+}}>} : {{.*}} into memref<128x8x1x64xf32>, memref<128x8x1xf32>
// CHECK: fd.merge {{.*}} : memref<128x8x1x64xf32>, memref<128x8x1xf32> into memref<128x8x64xbf16>
// CHECK-NOT: fd.attention
func.func @full_grid_hnd(%q: memref<128x8x64xbf16>, %k: memref<128x8x4096x64xbf16>,
                         %v: memref<128x8x4096x64xbf16>, %lens: memref<128xi32>,
                         %out: memref<128x8x64xbf16>) {
  fd.attention %q, %k, %v, %lens into %out {kv_layout = #fd.kv_layout<HND>, scale = 0.25 : f32}
      : memref<128x8x64xbf16>, memref<128x8x4096x64xbf16>, memref<128x8x4096x64xbf16>,
        memref<128xi32> into memref<128x8x64xbf16>
  return
}

// -----

// Speculative decoding (Lq = 4) is decode-shaped: the partials carry Lq.

// CHECK-LABEL: func @speculative
// CHECK: fd.partial_attention {{.*}} into memref<2x4x8x{{[0-9]+}}x64xf32>, memref<2x4x8x{{[0-9]+}}xf32>
// CHECK: fd.merge
func.func @speculative(%q: memref<2x4x8x64xf32>, %k: memref<2x8192x1x64xf32>,
                       %v: memref<2x8192x1x64xf32>, %lens: memref<2xi32>,
                       %out: memref<2x4x8x64xf32>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<2x4x8x64xf32>, memref<2x8192x1x64xf32>, memref<2x8192x1x64xf32>,
        memref<2xi32> into memref<2x4x8x64xf32>
  return
}

// -----

// Prefill-shaped attention (Lq = 16 > 8) is left alone.

// CHECK-LABEL: func @prefill
// CHECK-NEXT: fd.attention
// CHECK-NOT: fd.partial_attention
func.func @prefill(%q: memref<1x16x8x64xf16>, %k: memref<1x4096x8x64xf16>,
                   %v: memref<1x4096x8x64xf16>, %lens: memref<1xi32>,
                   %out: memref<1x16x8x64xf16>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<1x16x8x64xf16>, memref<1x4096x8x64xf16>, memref<1x4096x8x64xf16>,
        memref<1xi32> into memref<1x16x8x64xf16>
  return
}

// -----

// A sliding window: the planner sizes the split for the W + Lq - 1 keys a
// sequence attends to, not the cache: a 128-key window over a 32k cache is
// one split (the minimum chunk is 128 keys), where the whole cache would be
// 64. The window and the soft-cap carry over.

// CHECK-LABEL: func @sliding_window
// CHECK: fd.partial_attention {{.*}} {logits_soft_cap = 5.000000e+01 : f32, schedule = #fd.schedule<{{[^>]+}}>, window_left = 128 : i64} : {{.*}} into memref<1x64x1x64xf32>, memref<1x64x1xf32>
// CHECK: fd.merge
func.func @sliding_window(%q: memref<1x64x64xf16>, %k: memref<1x32768x8x64xf16>,
                          %v: memref<1x32768x8x64xf16>, %lens: memref<1xi32>,
                          %out: memref<1x64x64xf16>) {
  fd.attention %q, %k, %v, %lens into %out {window_left = 128, logits_soft_cap = 50.0 : f32}
      : memref<1x64x64xf16>, memref<1x32768x8x64xf16>, memref<1x32768x8x64xf16>,
        memref<1xi32> into memref<1x64x64xf16>
  return
}

// -----

// A window needs no length hint: a dynamic cache length is planned for the
// window's keys.

// CHECK-LABEL: func @window_dynamic_length
// CHECK: fd.partial_attention {{.*}} {schedule = #fd.schedule<{{[^>]+}}>, window_left = 4096 : i64} : {{.*}} into memref<1x32x{{[0-9]+}}x128xf32>
func.func @window_dynamic_length(%q: memref<1x32x128xf16>, %k: memref<1x?x8x128xf16>,
                                 %v: memref<1x?x8x128xf16>, %lens: memref<1xi32>,
                                 %out: memref<1x32x128xf16>) {
  fd.attention %q, %k, %v, %lens into %out {window_left = 4096}
      : memref<1x32x128xf16>, memref<1x?x8x128xf16>, memref<1x?x8x128xf16>,
        memref<1xi32> into memref<1x32x128xf16>
  return
}

// -----

// Attention sinks are counted once, in the merge: the partial attention
// does not see them.

// CHECK-LABEL: func @sinks
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<32xf32>
// CHECK: fd.partial_attention
// CHECK-NOT: sinks
// CHECK-SAME: into
// CHECK: fd.merge %{{.*}}, %{{.*}} sinks %[[S]] : memref<32xf32> into
func.func @sinks(%q: memref<1x32x64xf16>, %k: memref<1x4096x8x64xf16>,
                 %v: memref<1x4096x8x64xf16>, %lens: memref<1xi32>,
                 %s: memref<32xf32>, %out: memref<1x32x64xf16>) {
  fd.attention %q, %k, %v, %lens sinks %s : memref<32xf32> into %out
      : memref<1x32x64xf16>, memref<1x4096x8x64xf16>, memref<1x4096x8x64xf16>,
        memref<1xi32> into memref<1x32x64xf16>
  return
}

// -----

// ALiBi slopes bias the scores, so the partial attention reads them; the
// merge does not.

// CHECK-LABEL: func @alibi
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<16xf32>
// CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} alibi_slopes %[[A]] : memref<16xf32> into
// CHECK: fd.merge %{{.*}}, %{{.*}} into
func.func @alibi(%q: memref<1x16x64xf16>, %k: memref<1x2048x16x64xf16>,
                 %v: memref<1x2048x16x64xf16>, %lens: memref<1xi32>,
                 %a: memref<16xf32>, %out: memref<1x16x64xf16>) {
  fd.attention %q, %k, %v, %lens alibi_slopes %a : memref<16xf32> into %out
      : memref<1x16x64xf16>, memref<1x2048x16x64xf16>, memref<1x2048x16x64xf16>,
        memref<1xi32> into memref<1x16x64xf16>
  return
}

// -----

// Per-sequence query lengths reach both halves: the partial attention
// computes only the rows of queries, the merge writes the padding rows
// (zeros, lse -inf) without reading their partials; with ALiBi and sinks
// each stays where it was.

// CHECK-LABEL: func @query_lens
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<8xf32>, %[[QL:[a-z0-9]+]]: memref<2xi32>, %[[S:[a-z0-9]+]]: memref<8xf32>
// CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} alibi_slopes %[[A]] : memref<8xf32> query_lens %[[QL]] : memref<2xi32> into %{{.*}}, %{{.*}} {schedule = #fd.schedule<{{[^>]+}}>, window_left = 64 : i64} : {{.*}} into memref<2x4x8x{{[0-9]+}}x64xf32>
// CHECK: fd.merge %{{.*}}, %{{.*}} sinks %[[S]] : memref<8xf32> query_lens %[[QL]] : memref<2xi32> into
// CHECK-NOT: fd.attention

// ONE-LABEL: func @query_lens
// ONE: fd.partial_attention {{.*}} query_lens {{.*}} into memref<2x4x8x1x64xf32>, memref<2x4x8x1xf32>
// ONE: fd.merge {{.*}} query_lens

// CHUNK-LABEL: func @query_lens
// CHUNK: fd.partial_attention {{.*}} query_lens {{.*}} {chunk_length = 512 : i64, schedule = #fd.schedule<{{[^>]+}}>, window_left = 64 : i64}
// CHUNK: fd.merge {{.*}} query_lens
func.func @query_lens(%q: memref<2x4x8x64xf16>, %k: memref<2x4096x2x64xf16>,
                      %v: memref<2x4096x2x64xf16>, %lens: memref<2xi32>,
                      %a: memref<8xf32>, %ql: memref<2xi32>, %s: memref<8xf32>,
                      %out: memref<2x4x8x64xf16>) {
  fd.attention %q, %k, %v, %lens alibi_slopes %a : memref<8xf32> query_lens %ql : memref<2xi32> sinks %s : memref<8xf32> into %out {window_left = 64}
      : memref<2x4x8x64xf16>, memref<2x4096x2x64xf16>, memref<2x4096x2x64xf16>,
        memref<2xi32> into memref<2x4x8x64xf16>
  return
}

// -----

// An fp8 cache's scales go to the partial attention (they dequantize the
// keys and values the chunks read), not to the merge.
// CHECK-LABEL: func @fp8_scales
// CHECK-SAME: %[[KS:[a-z0-9]+]]: memref<1x4096x2xf32>, %[[VS:[a-z0-9]+]]: memref<1x4096x2xf32>
// CHECK: fd.partial_attention {{.*}} k_scale %[[KS]] : memref<1x4096x2xf32> v_scale %[[VS]] : memref<1x4096x2xf32> into
// CHECK: fd.merge
// CHECK-NOT: k_scale
func.func @fp8_scales(%q: memref<1x8x64xbf16>, %k: memref<1x4096x2x64xf8E5M2>, %v: memref<1x4096x2x64xf8E5M2>, %l: memref<1xi32>, %ks: memref<1x4096x2xf32>, %vs: memref<1x4096x2xf32>, %o: memref<1x8x64xbf16>) {
  fd.attention %q, %k, %v, %l k_scale %ks : memref<1x4096x2xf32> v_scale %vs : memref<1x4096x2xf32> into %o : memref<1x8x64xbf16>, memref<1x4096x2x64xf8E5M2>, memref<1x4096x2x64xf8E5M2>, memref<1xi32> into memref<1x8x64xbf16>
  return
}
