# Sourced by the bench scripts: fd-bench's model configurations and how one
# plan of them is compiled, written once.

# heads CONFIG: "Hq Hkv D" of fd-bench's --configs (fd-bench.cpp's kConfigs;
# a -wN config has a sliding window of N keys).
heads() {
  case $1 in
  llama3-8b) echo "32 8 128" ;;
  mha) echo "32 32 128" ;;
  gqa8) echo "64 8 128" ;;
  mqa) echo "32 1 128" ;;
  llama3-8b-w128) echo "32 8 128" ;;
  gpt-oss) echo "64 8 64" ;;
  gemma2-9b) echo "16 8 256" ;;
  *)
    echo "unknown config '$1' (llama3-8b, mha, gqa8, mqa, llama3-8b-w128," \
      "gpt-oss, gemma2-9b)" >&2
    return 2
    ;;
  esac
}

# The modeled table (bench/model_kernels.sh, model_fdemu.sh, and measured by
# run_on_device.sh): its configs, BxL shapes, and the page sizes of its
# paged rows (every config and shape). MODEL_CONFIGS and MODEL_SHAPES
# narrow them (ctest bench-model-fdemu-bf16).
model_configs=${MODEL_CONFIGS:-"llama3-8b mha gqa8 mqa gpt-oss gemma2-9b"}
model_shapes=${MODEL_SHAPES:-"1x32768 16x4096"}
model_page_sizes="16"

# comma_list WORDS...: the words joined by commas (fd-bench's lists).
comma_list() {
  local IFS=,
  echo "$*"
}

# The plans of the sliding-window comparison (bench/window_fdemu.sh, and
# measured by bench/run_on_device.sh): a 128-key window over long caches
# against the same heads without a window over a 128-key cache, and over the
# whole cache. "config:BxL" each.
window_plans="llama3-8b-w128:1x32768 llama3-8b-w128:16x4096 llama3-8b:1x128
  llama3-8b:16x128 llama3-8b:1x32768 llama3-8b:16x4096"

# compile_window_plans FD_COMPILE DIR TARGET SMS: window_plans, auto splits
# and one split, into DIR/<config>/B<b>_L<len>_<auto|s1>.
compile_window_plans() {
  local compile=$1 dir=$2 arch=$3 sms=$4 plan config shape batch len mode
  for plan in $window_plans; do
    config=${plan%%:*} shape=${plan#*:}
    batch=${shape%x*} len=${shape#*x}
    for mode in auto s1; do
      compile_plan "$compile" "$dir/$config/B${batch}_L${len}_${mode}" \
        "$config" "$batch" "$len" "$([ "$mode" = auto ] && echo auto || echo 1)" \
        "$arch" "$sms"
    done
  done
}

# compile_plan FD_COMPILE OUT CONFIG BATCH LEN SPLITS TARGET SMS [PAGE]: the
# NHD kernels (windowed for -wN) of CONFIG for BATCH sequences of LEN tokens
# with SPLITS (auto, planned for SMS SMs, or a count) for TARGET, into OUT;
# queries and caches of DTYPE (environment; default f16); paged with PAGE
# tokens per page when given.
compile_plan() {
  local compile=$1 out=$2 config=$3 batch=$4 len=$5 splits=$6 arch=$7 sms=$8
  local page=${9:-0} hq hkv dim window=0
  read -r hq hkv dim <<<"$(heads "$config")"
  case $config in *-w*) window=${config##*-w} ;; esac
  "$compile" --no-cache --head-dim "$dim" --num-q-heads "$hq" \
    --num-kv-heads "$hkv" --dtype "${DTYPE:-f16}" --kv-layout NHD \
    --arch "$arch" --sm-count "$sms" --num-splits "$splits" \
    --batch "$batch" --max-len "$len" --window-left "$window" \
    --page-size "$page" -o "$out" >/dev/null
}
