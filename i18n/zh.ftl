# oomlab 的简体中文目录。每条消息与 en.ftl 中的同名消息一一对应，变量相同（tests/i18n.rs）。
# 术语见 i18n/GLOSSARY.md。

## 顶栏与标签页

app-title = oomlab —— batch size 过大为何会导致显存溢出？
language = 语言
tab-timeline = 单步时间线
tab-sweep = 显存与 batch 大小
tab-allocator = 分配器视图
tab-training = 训练
tab-real-models = 真实模型

## 显存类别

category-parameters = 参数
category-gradients = 梯度
category-optimizer-state = 优化器状态
category-master-weights = fp32 主权重
category-activations = 激活值
category-temporaries = 临时张量
category-workspace = 工作区
category-communication = 通信缓冲区
category-kv-cache = KV 缓存

## 数字的来源

source-predicted = 预测（计划）
source-allocator = 分配器（实时）
source-device = 设备（驱动报告）

## 显存溢出面板

oom-heading = 在 { $op } 处显存溢出
oom-plain = 这一步需要 { $needed }，但 { $budget } 的预算中只剩 { $free } 可用。
steps-taken = { $count } 步

## 控制面板

controls-setup = 设置
controls-model = 模型
controls-parameters = { $count } 个参数
controls-batch = batch 大小
controls-sequence = 序列长度
controls-budget = 显存预算
controls-allocator = 分配器选项
controls-alloc-expandable = 可扩展段
controls-alloc-expandable-hint = 每个池只用一个按页增长的段，段边界两侧释放的显存可以连成一块（expandable_segments:True）。
controls-alloc-max-split = 最大拆分大小
controls-alloc-max-split-hint = 不小于这个大小的缓存块永不拆分，较小的请求也不会占用它们（max_split_size_mb）。
controls-alloc-gc = 垃圾回收阈值
controls-alloc-gc-hint = 保留的显存超过预算的这一比例时，释放无人使用的缓存段，空闲最久的先释放（garbage_collection_threshold）。
controls-alloc-max-split-value = MiB 及以上
controls-alloc-gc-value = 占预算的比例
controls-gpus = 模拟 GPU（数据并行）
controls-gpus-count = GPU 数
controls-gpus-hint = 每块模拟 GPU 都有上面的预算、自己的分配器和上面那么大的一批数据：全局批次是它的这么多倍。
controls-zero = ZeRO 阶段
controls-zero-hint = DDP：每块 GPU 保存全部。ZeRO-1 把优化器状态切分到各块 GPU 上，ZeRO-2 再切分梯度，ZeRO-3 再切分参数。
controls-zero-0 = DDP（不切分）
controls-bucket = 通信桶（元素）
controls-gpus-simulated = 模拟：这些 GPU 轮流使用这一台设备，并不存在网络。
controls-techniques = 优化技术
controls-checkpointing = 梯度检查点
checkpoint-off = 关闭
checkpoint-every-block = 每个块
checkpoint-every-k = 每 { $k } 个块（√L）
checkpoint-selective = 选择性（注意力）
controls-precision = 精度
controls-attention = 注意力
attention-standard = 标准
attention-fused = 融合（flash）
controls-optimizer = 优化器
controls-accumulation = 梯度累积步数
controls-lora-rank = LoRA 秩（0 = 关闭）
controls-offload = 卸载到主机内存
controls-offload-hint = ZeRO-Offload（卸载）：优化器状态（如果选择，还有梯度）存放在主机内存（计算机自己的内存）中，优化器这一步在 CPU 上运行。GPU 显存占用更少；每一步都要经总线复制。
controls-batching = 从文本组成批次
controls-batching-hint = 窗口：在语料中任意位置截取，每个位置都是真实字符。把台词当作文档：每行一段，按本批最长的一段补齐（填充）；长度相近的台词放在一起（填充更少）；或者一段接一段打包成满行，注意力在每段台词的开头处截止。
controls-sequence-documents = 台词决定每个批次的长度：本批最长的一段，最多到模型的位置数。
batching-windows = 窗口
batching-padded = 台词，补齐
batching-bucketed = 台词，按长度分组
batching-packed = 台词，打包
ways-heading = 剧中台词组成的批次，每批 { $batch } 个
ways-way = 批次
ways-padding = 填充
ways-per-token = 每个有用字符的显存
ways-largest = 能放下的最大 batch
ways-none = 都放不下
ways-line = { $way }：填充 { $padding }，每个有用字符 { $per }，能放下的最大 batch 为 { $largest }
ways-source = 预测（计划），每种方式取它的第一个批次：峰值除以有东西可预测的字符数。
offload-none = 不卸载
offload-optimizer = 优化器状态
offload-optimizer-gradients = 优化器状态和梯度
controls-compare = 对比
compare-checkpoint = 每个块设梯度检查点
compare-fused = 融合注意力
compare-accumulation = 梯度累积 ×4
controls-seed = 随机种子
controls-projector = 投影模式
controls-display = 显示：
controls-high-contrast = 高对比度
controls-reduced-motion = 减少动画
controls-text-size = 文字大小
run-one-step = 单步
run-train = 训练
run-stop = 停止
run-engine = 计算引擎：{ $backend }
run-progress = 这一步正在运行：第 { $done } / { $total } 个算子

## 更多类别（计划中的名字保留在代码里：parameters、optimizer_state……）

category-input = 输入
category-logits = 输出 logits

## 没有设备数字时

device-none-yet = 还没有运行过任何一步
device-none-browser = 浏览器不报告：WebGPU 不提供任何显存数字，因此这里的每个字节都由 oomlab 的分配器在这一步执行时记账
device-none-backend = 此后端不报告（它的驱动层没有分配器报告）
device-none-cpu = CPU 后端没有设备：它的段是主机缓冲区，按分配器的账目计算

## 峰值时的显存分解

bd-at-peak = 峰值时
bd-total = 合计
bd-reserved = 预留（段）
bd-no-step = 还没有真正运行过一步：运行一步后，分配器和设备两列才会填上。
bd-device = 设备（这一步之后）：{ $segments } 个段缓冲区共 { $segment_bytes } —— 即分配器预留的 { $reserved }，加上驱动自身取整多出的 { $rounding } 字节 —— 位于 { $blocks } 个驱动显存块中，共 { $block_bytes }。另有 { $others } 个分配（{ $other_bytes }）在 oomlab 的分配器之外（wgpu 自己的缓冲区、oomlab 的 uniform 与回读缓冲区{ $ui_textures }）。
bd-ui-textures = 、界面的纹理
bd-counters = wgpu 自己的计数器：{ $buffers } 个缓冲区（实时计数），共 { $bytes }；{ $allocations } 次显存分配。
bd-disagrees = 驱动的报告与分配器不一致：它没有列出的段 { $missing }，多出的缓冲区 { $leftover }。
bd-device-reason = 设备：{ $reason }。
bd-group-activations = 激活值（为反向传播保存的 + 临时张量）
bd-group-states = 梯度 + 优化器状态 + 主权重
bd-group-buffers = 缓冲区（输入、logits、工作区）
bd-group-line = { $name }：{ $bytes }（占 { $percent }%）
ms-heading = 模型状态
ms-bytes = 字节
ms-times = × 可训练权重
ms-summary = { $optimizer } 保存 { $count } 个优化器状态张量{ $master }：在权重和梯度之外，再占可训练权重字节数的 { $copies } 倍。
ms-master = ，另加 fp32 主权重
ms-on-host = { $name }（在主机内存中）

## 显存溢出面板

oom-title = 显存溢出
oom-explain = 通俗地说：这一步还需要为「{ $tensor }」（{ $category }）分配 { $requested }，由 { $op } 申请。缓存中没有足够大的块，分配器于是尝试预留一个新的 { $tried } 段，但 { $capacity } 的预算中只剩 { $free } 未被预留（另有 { $cached_free } 空闲在已有的段里，但碎片太小或属于另一个池）。
oom-try = 试试：
suggest-checkpointing = 每个块设梯度检查点
suggest-fused = 使用融合注意力
suggest-accumulation = 梯度累积：micro-batch 减半，步数加倍
suggest-mixed = 混合精度（bf16）
suggest-smaller = batch 减半
suggest-expandable = 可扩展段（显存已碎片化）

## 训练

train-status = 第 { $step } 步：loss { $loss }（由这一步算出）。上一步用时 { $ms } ms；最近 { $window } 步平均每秒 { $rate } 步。
train-none = 还没有训练步：请按“单步”或“训练”。
train-axis-step = 步
train-axis-loss = 损失 loss

## 单步时间线

tl-none = 还没有记录任何一步。
tl-summary = 一步之中已分配的显存，{ $source }：{ $ops } 个 op。峰值 { $peak }，出现在 { $op }。
tl-axis-op = 这一步的 op 序号
tl-reserved = 预留
tl-peak = 峰值
tl-scrubber = 游标
tl-op = op 序号
tl-at = 在 { $op }：已分配 { $allocated }，预留 { $reserved }。
tl-alive = 此处有 { $count } 个存活的张量
tl-start = 这一步的开始
tl-collectives = 集合通信（所有 GPU 同时）
tl-collective = 集合通信：{ $what } 的 { $kind }，所有 GPU 同时进行；{ $bytes } 经过 { $buffer }。
tl-transfers = GPU 与主机内存之间的复制（卸载）
tl-transfer = 经总线的复制：{ $what } 的 { $kind }，{ $bytes }；主机内存不是 GPU 显存。
host-heading = 在主机内存中（不是 GPU 显存）
host-column = 主机内存
host-saved = GPU 少占用 { $saved }：这些字节改存在主机内存中。
host-bus = 每一步有 { $bytes } 经过总线（{ $down } 到主机，{ $up } 返回）：按 { $rate }（PCIe 4.0 ×16）约需 { $ms } 毫秒（预测）。
host-time = 在 { $engine } 上测得：使用卸载每步 { $with } 毫秒，不使用 { $without } 毫秒（时间为 { $ratio } 倍）。
host-time-alone = 在 { $engine } 上测得：使用卸载每步 { $with } 毫秒。把卸载设为“不卸载”再运行一步，即可测出不使用时的时间。
host-time-none = 运行一步，测出卸载在时间上的代价。

## 显存与 batch 大小

sw-none = 没有扫描结果。
sw-axis-batch = batch 大小（log₂）
sw-axis-peak = 峰值 { $unit }
sw-this-batch = 当前 batch
sw-budget = 预算
sw-oom-from = { $name }：从 batch { $batch } 起显存溢出
sw-summary = { $name }：能放下的最大 batch 为 { $fits }；从 batch { $oom } 起显存溢出
sw-summary-all-fit = { $name }：能放下的最大 batch 为 { $fits }；不会显存溢出（每个 batch 都放得下）
sw-fits-none = 无
pg-heading = 每块 GPU 的显存与 GPU 数量，{ $source }
pg-axis-gpus = 模拟 GPU 数
pg-this = 当前设置的 GPU 数
pg-fits = { $name }：从 { $gpus } 块 GPU 起放得进预算
pg-fits-none = { $name }：8 块 GPU 以内都放不进预算
pg-fits-hidden = { $name }：从……块 GPU 起放得下（揭晓前隐藏）
pg-description = 每块 GPU 的 batch 为 { $batch } 时，1 到 8 块模拟 GPU 上每块 GPU 的显存峰值，按 ZeRO 阶段分线；预算为 { $budget }。
rank-picker = 显示这块 GPU 的这一步：
rank-gpu = { $k } 号 GPU
rank-same = 预测：每块模拟 GPU 的计划只差在各自保存的分片上，所以在真实的一步运行之前都显示 GPU 0 的数字。

## 分配器视图

al-summary = 在 { $op }：{ $segments } 个段，预留 { $reserved }，已分配 { $allocated }，段内空闲 { $free }（最大空闲块 { $largest }）。
al-block = { $tensor } —— { $bytes } 的块
al-free = 空闲 —— { $bytes }
al-driver = 其下为{ $source }：{ $blocks } 个显存块，共 { $bytes }，容纳这些段缓冲区（请求 { $requested }，报告 { $reported }）。
al-unnamed = （未命名）

## 主区域

main-export = 导出：
main-baseline = { $name } · batch { $batch }（{ $micro } × { $accum } 个 micro-batch）× 序列 { $seq } · 预算 { $budget }
main-cannot-build = 无法构建这一设置：{ $error }
main-oom-predicted = （由计划预测；真正运行一步也会以同样方式失败）
alloc-at-oom = 「{ $tensor }」放不下的那一刻（{ $op }）分配器的状态，按计划的预测：
main-at-peak = 峰值时
main-model-state = 模型状态，逐个张量
main-why = 为什么？
main-real-heading = 真实 GPU 上的真实模型
main-claims = 用估算器检验的说法

explain-breakdown = 参数、梯度和优化器状态只取决于模型：AdamW 为每个权重再保存两份（m 和 v），混合精度还要加上 fp32 主权重。激活值——前向传播为反向传播保存的张量——随 batch × 序列长度增长（注意力概率随序列长度的平方增长），所以模型本身放得下，大 batch 却会显存溢出。
explain-timeline = 前向传播中，每一层保存自己的激活值，显存一路上升；在反向传播开始前后到达峰值；随后反向传播释放不再需要的张量，显存回落。模型状态是下面那层平坦的底。梯度检查点在反向传播时重新计算激活值，从而压低这道山脊。
explain-sweep = 每根柱子是该 batch 大小下一步的峰值。模型状态在每个 batch 下都一样；激活值随 batch 线性增长，所以柱子会在某个 batch 越过预算线：那就是第一次显存溢出。各种技术会移动这个点：梯度检查点和融合注意力缩小激活值，梯度累积让 micro-batch 保持较小，混合精度让激活值减半，但要加上主权重。
explain-allocator = 缓存分配器（沿用 PyTorch 的规则）向设备预留段，再从段中切出块。释放的块留在缓存中以供复用，而不还给设备，所以预留的显存多于已分配的显存；小到放不下下一个请求的空闲间隙就是碎片。

## 提示

notice-webgl = 此浏览器不提供 WebGPU（只有 WebGL）：每一步改在 CPU 后端运行，计划相同，数字相同。
notice-no-gpu = GPU 计算不可用（{ $error }）；每一步改在 CPU 后端运行。
notice-font-failed = 无法加载中文字体（{ $error }）；继续显示英文。
font-loading = 正在加载中文字体……

size-bytes = { $n } 字节

## 用文字描述的配置（曲线名、主区域的标题）

tech-baseline = 基线
tech-this-setup = 当前设置
tech-mixed = { $precision } 混合精度
tech-checkpoint-blocks = 每个块设梯度检查点
tech-checkpoint-every = 每 { $k } 个块设梯度检查点
tech-checkpoint-selective = 选择性梯度检查点
tech-fused = 融合注意力
tech-accum = 梯度累积 ×{ $k }
tech-gpus-ddp = { $gpus } 块 GPU，数据并行
tech-gpus-zero = { $gpus } 块 GPU，ZeRO-{ $stage }
tech-offload-optimizer = 优化器状态在主机内存中
tech-offload-gradients = 优化器状态和梯度在主机内存中
tech-batching-padded = 台词补齐到最长
tech-batching-bucketed = 台词按长度分批
tech-batching-packed = 台词打包成满行
tech-lora = LoRA r={ $rank } α={ $alpha }，作用于 { $targets }

## 导出

export-sweep-csv = 扫描结果 CSV
export-step-json = 时间线 + 分配器 JSON
export-snapshot = PyTorch 显存快照
export-estimate-json = 估算结果 JSON
export-png = 窗口截图 PNG

## 真实模型：控件

real-model = 模型
real-gpu = GPU 型号
real-custom-size = 自定义容量
real-custom = 自定义（{ $name }）
real-architecture = 架构：h { $h }，L { $l }，heads { $heads }（kv { $kv }），f { $f }，V { $v }
real-hidden = 隐藏维度
real-layers = 层数
real-heads = 注意力头数
real-kv-heads = kv 头数
real-mlp-width = MLP 宽度
real-vocab = 词表大小
real-gelu = GELU 激活的 MLP
real-swiglu = SwiGLU 激活的 MLP
real-layernorm = LayerNorm 归一化
real-rmsnorm = RMSNorm 归一化
real-dropout = dropout（随机失活）
real-tied = 输入输出共享嵌入
real-micro-batch = micro-batch 大小
real-sequence = 序列长度
real-accumulation = 梯度累积
real-precision = 精度
real-optimizer = 优化器
real-recomputation = 激活重计算
real-ckpt-off = 关闭
real-ckpt-selective = 选择性
real-ckpt-full = 每个块（完整）
real-fused = 融合注意力
real-data-parallel = 数据并行 GPU 数
real-zero = ZeRO（零冗余优化器）阶段
real-pipeline = 流水线阶段
real-schedule = 调度
real-schedule-1f1b = 1F1B（一前一后）
real-schedule-interleaved = 交错式
real-chunks = 每阶段的块数
real-context-parallel = 上下文并行
real-context-ring = 环形注意力
real-context-ulysses = Ulysses 方式
real-stages = { $count } 个阶段的流水线（{ $schedule }）：上面的明细是最重的阶段 { $worst } 的。
real-stage = 阶段 { $stage }：{ $layers } 层{ $holds ->
        [embedding] 及嵌入层
        [head] 及输出头
        [both] ，含嵌入层和输出头
       *[none] {""}
    }，{ $flight } 个 micro-batch 在途，峰值 { $peak }
real-mtp = 计入多 token 预测模块（transformers 的模型里没有）
real-tensor-parallel = 张量并行
real-sequence-parallel = 序列并行
real-offload-optimizer = 卸载优化器状态
real-offload-gradients = 卸载梯度
real-offload-parameters = 卸载参数
real-lora = LoRA 秩（0 = 关闭）
real-qlora = QLoRA（4 位量化基座）
real-fixed-costs = 固定开销
real-framework = 框架
real-expert-parallel = 专家并行
real-moe = 混合专家模型：{ $experts } 个专家，每个 token 用 { $k } 个。它的权重、梯度和优化器状态是全部 { $all } 个参数的；它的激活值只对应一个 token 经过的 { $active } 个参数。
real-own-model = 你自己的模型（Hugging Face 的 config.json）
real-own-how = 粘贴、打开或把模型的 config.json 拖到窗口上：估算使用它描述的架构，分享的链接也带着这个架构。
real-own-paste = 在这里粘贴 config.json
real-own-read-button = 使用这个配置
real-own-path = config.json 或其文件夹的路径
real-own-drop = 或把 config.json 拖到窗口上
real-own-read = 已读取 { $name }：{ $parameters } 个参数。
real-own-cannot = 这个配置无法估算：{ $error }
real-own-not-text = { $name } 不是文本文件（config.json 是 UTF-8 文本）。
real-own-too-large = { $path }：{ $bytes } 字节，超过读取上限 { $max } 字节
real-catalog = 已发布的配置（Hugging Face）

## 真实模型：估算

real-cannot = 无法估算这一配置：{ $error }
real-predicted-note = 由闭式估算器预测（不是实测）：沿用玩具模型的类别，套用到真实模型上。
real-fits = 放得下：每个 GPU 用 { $peak }，容量 { $capacity }（{ $percent }%）
real-oom = 显存溢出：每个 GPU 需要 { $peak }，而 { $gpu } 只有 { $capacity }
real-summary = { $model }：{ $params }；能放下的最大 micro-batch：{ $max }；每个优化器步的 token 数：{ $tokens }（micro-batch { $micro } × 序列 { $seq } × 梯度累积 { $accum } × { $gpus } 个 GPU）
real-params = { $all } 个参数
real-params-trained = { $all } 个参数，其中训练 { $trained } 个
real-offload = 卸载：每个 GPU 占用 { $host } 主机内存；每步经 PCIe 传输 { $pcie }
real-per-gpu = 每个 GPU
real-predicted = 预测
real-source = 来源
real-peak = 峰值
real-sum = 总和：每个 GPU 上必须放得下的量
real-mem-vs-micro = 显存与 micro-batch 大小
real-capacity = GPU 容量
real-max = 能放下的最大 micro-batch：{ $max }；从 micro-batch { $oom } 起显存溢出
est-communication = 通信缓冲区
est-cuda-context = CUDA 上下文
est-fragmentation = 碎片余量
explain-real = 与玩具模型相同的记账方式，用闭式公式套到真实模型上：参数、梯度、优化器状态和主权重取决于模型本身，以及它们如何存储和切分（ZeRO 把它们分摊到各个数据并行的 GPU 上）；激活值随 micro-batch × 序列长度增长（GPT 每层用 Korthikanti 等人的 sbh(34 + 5as/h)，LLaMA 的 SwiGLU、RMSNorm 和分组查询注意力逐个张量推导）；logits 随词表大小增长。在玩具模型自己的配置上，估算器逐个类别给出与计划完全相同的字节数。

## 真实模型：每一行公式的出处

src-params = 由架构精确计数：{ $formula }
src-zero = Rajbhandari 等 2020（ZeRO），§3：2Ψ + 2Ψ + KΨ，按阶段分摊到 N_d 个 GPU
src-zero-context = Rajbhandari 等 2020（ZeRO），§3：2Ψ + 2Ψ + KΨ，按阶段分摊到 N_d × C 个 GPU，即数据并行和上下文并行的 GPU（它们持有相同的权重）
src-activations = Korthikanti 等 2022，§4：每层 sbh(34 + 5as/h)，逐个张量推导（GQA、SwiGLU、RMSNorm）
src-logits = lm_head 的输出、为反向传播保存的 softmax（fp32：Korthikanti 的 4sbv）以及各个 loss
src-logits-grad = logits 的梯度，在反向传播开始时与 softmax 同时存活
src-input = micro-batch 的 token id 与标签（PyTorch 中为 int64）
src-mlp-working-set = 最后一层 MLP 反向传播时存活的梯度：残差流的和 MLP 的
src-working-set = 一层反向传播的工作集：它的残差流、注意力和 MLP 的梯度
src-context = CUDA 上下文与已加载的内核：每个进程约 500 MiB（假设的典型值；可用 nvidia-smi 测量后填入）
src-workspace = cuBLAS 工作区，PyTorch 默认的 CUBLAS_WORKSPACE_CONFIG :4096:2:16:8（8.125 MiB），Hopper 上为 32 MiB（aten/src/ATen/cuda/CublasHandlePool.cpp）
src-ddp = PyTorch DDP 的梯度桶：梯度的一份副本，除非 gradient_as_bucket_view=True（torch.nn.parallel.DistributedDataParallel 文档）
src-zero-buckets = DeepSpeed ZeRO 的 reduce_bucket_size 与 allgather_bucket_size，默认各 5e8 个元素；第 3 阶段会收集一层的参数（并预取下一层）
src-sp = 序列并行在列并行线性层之前，把一层的输入 all-gather 成完整序列（Korthikanti 等 2022，§4.2.2）
src-fragmentation = 分配器碎片余量：假设为已分配字节的 5 %（预留减去已分配；可填入你的测量值来替换）
src-offload = Ren 等 2021（ZeRO-Offload，卸载）：fp32 状态和梯度放在主机上，16 位权重和梯度每一步都经 PCIe 传输
src-found-inf = 损失缩放器的溢出标志（found_inf），一个 u32
src-freed = 在峰值前已释放，峰值在某一层的反向传播中（在 loss 处它们占 { $bytes }）；{ src-logits }
src-activations-hf = Hugging Face transformers 的 eager 代码路径，逐个张量推导（modeling_gpt2.py、modeling_llama.py，按 CUDA 上的行为）：下方按名称列出一层保存的张量
src-context-measured = CUDA 上下文与已加载的内核：在你的 GPU 上测得（{ $bytes }）
src-fragmentation-measured = 分配器碎片：在你的 GPU 上测得（已分配字节的 { $percent } %）

## 说法检验

claim-holds = 成立
claim-breaks = 不成立
claim-verdict = 判定方法：{ $test }。

## 控制面板：补充

controls-heads = 头数
preset-tiny = 微型
preset-small = 小型
preset-medium = 中型

## 各个说法，估算器算出的数字作为参数（也用于 `oomlab claims`）

claim-doubling = batch size 翻倍，显存增加 1.8–2.5 倍。
claim-doubling-source = 种子文档（../shared/seed）
claim-doubling-test = 每个比值 峰值(2b)/峰值(b)（b = 1、2、4、8）都在 [1.8, 2.5] 之内
claim-doubling-finding = LLaMA-2 7B，bf16 混合精度，Adam，序列长度 4096：把 b 从 1、2、4、8 翻倍，峰值分别乘以 { $ratios } —— { $below ->
        [yes] 每次都低于 2 倍
       *[no] 达到或超过 2 倍
    }（{ $count } 个中有 { $inside } 个在 1.8–2.5 之内），因为模型状态和固定开销不随 batch 增长；只有当激活值远远超过其余一切时，比值才接近 2。

claim-seed-figures = LLaMA-2-7B 用 BF16 时，batch 64 占 38.2 GB，batch 128 占 89.7 GB（2.35 倍）。
claim-seed-figures-source = 种子文档（../shared/seed）
claim-seed-figures-test = batch 64 和 128 时的整个峰值（序列长度 512，取 bf16 混合精度与纯 bf16 中较小者）与文中数字相差不超过 ±{ $tolerance } %，二者之比与 2.35 相差不超过 ±{ $tolerance } %
claim-seed-figures-finding = 用 Adam 全量训练它的 { $parameters } 个参数，序列长度 512：batch 64 时峰值为 { $at64 } GB，batch 128 时为 { $at128 } GB（×{ $ratio }）。仅模型状态在 bf16 混合精度下就占 { $mixed } GB（每个参数 16 字节），纯 bf16 下占 { $pure } GB。

claim-zero-stages = ZeRO 第 0–3 阶段把 7.5 B 模型在 64 个 GPU 上的模型状态从 120 GB 降到 31.4、16.6 和 1.9 GB。
claim-zero-stages-source = Rajbhandari 等 2020（ZeRO），图 1
claim-zero-stages-test = 每个阶段每个 GPU 上的模型状态，按 7.5 B 参数缩放后，与图中数字相差不超过 0.05 GB（其舍入精度）
claim-zero-stages-finding = 按 7.5 B 参数缩放：第 0–3 阶段每个 GPU 分别为 { $stages } GB（2Ψ + 2Ψ + 12Ψ，分片后）。

claim-zero3-batch = 在 8×A100 上用 ZeRO-3，7B 模型每个 GPU 的 batch 从 2 提高到 16。
claim-zero3-batch-source = 种子文档（../shared/seed）
claim-zero3-batch-test = 不用 ZeRO 和在 8 个 GPU 上用 ZeRO-3 时能放下的最大 micro-batch，分别等于 2 和 16
claim-zero3-batch-finding = LLaMA-2 7B，bf16 混合精度，Adam，序列长度 2048，A100 80 GB：不用 ZeRO 时{ $fits_without ->
        [no] 连 micro-batch 1 都放不下
       *[yes] 最大 micro-batch 为 { $without }
    }；在 8 个 GPU 上用 ZeRO-3 时最大 micro-batch 为 { $with }，每个块设梯度检查点时为 { $with_checkpointing }。收益是真的，但它来自把 { $states } GB 的模型状态分片，而能用的 batch 取决于序列长度和梯度检查点。

claim-qlora = 用 LoRA/QLoRA，7B 模型能在一块 A100 80G 上以 batch 64 训练，约占 12 GB。
claim-qlora-source = 种子文档（../shared/seed）
claim-qlora-test = batch 64、序列长度 512 时的峰值（用或不用梯度检查点，取较小者）不超过 12 GB + { $tolerance } %
claim-qlora-finding = QLoRA（4 位量化基座，每个投影上都有秩 16 的适配器），序列长度 512：batch 1 时 { $at1 } GB，batch 64 时 { $at64 } GB（每个块设梯度检查点时 { $at64_checkpointed } GB）。冻结的 4 位基座很小（{ $base } GB），但激活值仍随 batch 增长。

claim-korthikanti = 16 位训练中，一层 GPT 保存 sbh(34 + 5as/h) 字节的激活值。
claim-korthikanti-source = Korthikanti 等 2022，§4.1
claim-korthikanti-test = 一层的激活值（2 层减 1 层）等于论文公式加上 LayerNorm 统计量，精确到字节
claim-korthikanti-finding = GPT-2 XL，b 4，s 1024：估算器算出一层保存 { $layer } —— 即论文的 { $paper }，加上论文略去的 { $statistics } LayerNorm 统计量。5as/h 这一项（这里为 { $attention }）就是注意力矩阵：融合注意力会去掉它。

claim-offload = ZeRO-Offload 把优化器卸载到 CPU 上，需要快速的 PCIe 链路（至少 32 GB/s）。
claim-offload-source = 种子文档（../shared/seed）；Ren 等 2021
claim-offload-test = GPU 显存下降，并且在 32 GB/s 下，一步的 PCIe 传输用时不超过它在 A100 的 312 TFLOP/s（bf16 稠密）下的计算时间，micro-batch 为 1
claim-offload-finding = LLaMA-2 7B，一块 A100 80 GB，序列长度 2048，micro-batch 1：之前 GPU 上 { $before } GB，之后 { $after } GB，主机内存中 { $host } GB。每一步经 PCIe 传输 { $pcie } GB：在 32 GB/s 下用时 { $pcie_secs } s，而按 GPU 峰值算力计算只需 { $compute_secs } s —— 要把传输藏在计算之后，需要 { $needed } GB/s，或者在 32 GB/s 下使用 micro-batch { $hides_from } 及以上。

## 无法照原样使用的分享链接

link-unusable = 无法使用链接中的设置（{ $why }）；改为显示默认设置。
link-real-unusable = 无法使用链接中真实模型的设置（{ $why }）；该视图改为显示默认设置。
link-adjusted = 链接中有些设置超出范围，已作调整。
link-too-long = 链接太长
link-no-settings = 缺少 s= 字段
link-not-base64 = 不是 base64 编码：{ $error }
link-not-settings = 不是有效的设置：{ $error }

## 导出与运行状态

export-saved = 已保存到 { $path }
export-downloaded = 已下载 { $name }
export-cannot-write = 无法写入 { $path }：{ $error }
export-download-failed = 下载失败：{ $error }
export-png-failed = 无法编码 PNG：{ $error }
error-config = 这一设置无法运行：{ $error }
error-gpu = GPU 上的这一步失败了：{ $error }
error-host = 主机内存放不下这一步：{ $error }
host-err-step = CPU 后端把这一步放在主机内存中：它需要 { $needed }（预留的设备显存 { $reserved }，每字节 { $per_byte } 字节主机内存，再加上 batch），但主机只有 { $available } 可用。请用更小的 batch，或用 GPU 后端。
host-err-indices = 主机无法为张量 '{ $tensor }'（{ $bytes }）分配索引
host-err-memory = 主机无法分配张量 '{ $tensor }'（{ $bytes }）
error-step = 这一步失败了：{ $error }
error-internal = oomlab 内部失败，这一步中止了（{ $error }）。下一步会重新开始；请报告这条信息。

backend-cpu = CPU（参考实现）
backend-cpu-worker = CPU（参考实现），在后台线程中运行

real-custom-gpu = 自定义 { $size }

## 视图空间

tab-breakdown = 显存分解
main-peak-line = 峰值时：已分配 { $allocated }，预留 { $reserved }（{ $source }）；预算 { $budget }。
drawer-open = 设置 »
drawer-close = « 返回视图
real-architecture-short = 架构
real-sources = 每一行的出处
real-source-line = { $category }的出处：{ $source }

## 键盘快捷键

keys-title = 键盘快捷键
keys-help = ? —— 显示或隐藏这个列表
keys-focus = Tab 和 Shift+Tab —— 在控件之间移动；回车或空格按下获得焦点的控件，方向键移动获得焦点的滑块
keys-step = 空格 —— 运行一步
keys-batch-up = B —— batch 加倍
keys-batch-down = Shift+B —— batch 减半
keys-fit = F —— 让图表适配数据
keys-present = P —— 演示模式（大字体、高对比度、色盲友好的配色）
keys-display = 显示（在控件下方）：高对比度、减少动画、文字大小最大 200 %（随设置保存；链接可以开启它们）
keys-reader = 屏幕阅读器能读到每个控件、文字和图表说明（在浏览器中由页面为阅读器镜像）；一步完成、显存溢出错误和揭晓的答案都会被播报
keys-close = 关闭

## 课程

lessons = 课程
lessons-close = 关闭课程
lesson-chapter = 第 { $n } 章，共 { $count } 章
lesson-prev = ‹ 上一章
lesson-next = 下一章 ›
lesson-reveal = 揭晓答案
lesson-show-control = 在设置中显示
lesson-your-guess = 你的猜测
lesson-times = 倍
lesson-number-verdict = 答案是 × { $answer }；你猜的 × { $guess } 相差 { $off } %。{ $close ->
        [yes] 很接近！
       *[no] 还差一些：再想想哪些在增长、哪些保持不变。
    }
lesson-choice-right = 答对了。
lesson-choice-wrong = 不是这个：答案是“{ $answer }”。
lesson-from-step = 真实的一步：{ $step }（{ $source }）；计划的预测：{ $plan }。
lesson-step-differs = 真实的一步与计划不一致：上面的答案来自真实的一步。oomlab 的计划本应准确预测它自己的分配器，所以值得报告这个问题。
lesson-step-note = 现在用这些设置真正运行一步；分配器一列会填在计划的预测旁边。

lesson-fill-title = 一个训练步中，显存被什么占满
lesson-fill-body = batch 为 { $batch }、序列长度为 { $seq } 时，这一步的峰值是 { $peak }。两类字节分享它：模型状态——参数、梯度和 AdamW 的两个动量——以及为反向传播保存的激活值和临时张量。
lesson-fill-question = 峰值时，激活值和临时张量占的显存是模型状态的多少倍？
lesson-fill-answer = 模型状态占 { $states }，激活值和临时张量占 { $activations }；{ $largest } 是最大的一类：在 { $peak } 的峰值中占 { $bytes }。

lesson-batch-title = batch 大小：什么在增长，什么不变
lesson-batch-body = 模型状态与 batch 无关。激活值随 batch 增长。
lesson-batch-question = batch 从 { $batch } 到 { $double }：峰值需要的显存是原来的多少倍？
lesson-batch-answer = 峰值从 { $before } 变为 { $after }：模型状态保持 { $states }，激活值和临时张量从 { $activations } 增长到 { $activations_after }。种子文档说，batch 翻倍，显存要增加 1.8–2.5 倍。

lesson-sequence-title = 序列长度与注意力的 T² 项
lesson-sequence-body = 大多数激活值随 batch × 序列长度增长，但注意力概率随序列长度的平方增长。
lesson-sequence-question = batch 不变，序列长度从 { $seq } 到 { $double }：为反向传播保存的激活值在其峰值时需要的显存是原来的多少倍？
lesson-sequence-answer = 保存的激活值从 { $before } 变为 { $after }；仅注意力概率就从 { $attention_before } 变为 { $attention_after }。

lesson-peak-title = 峰值出现在哪里
lesson-peak-body = 时间线显示这一步 { $ops } 个 op 每一个之后已分配的显存。沿着它拖动 op 滑块，看看哪些张量还存活。
lesson-peak-question = 这一步的哪个阶段显存最高？
lesson-peak-forward = 前向传播中
lesson-peak-backward = 反向传播中
lesson-peak-optimizer = 优化器步中
lesson-peak-answer = 峰值 { $peak } 出现在 { $op }：所有保存的激活值仍然存活，而第一批梯度正在生成。
keys-chapters = 左右方向键 —— 上一章和下一章课程
keys-reveal = R —— 揭晓本章课程的答案（运行真实的一步）

lesson-allocator-title = 分配器：预留与已分配
lesson-allocator-body = 缓存分配器向设备预留段，再从段中切出块。释放的块留在段里缓存起来，给下一个张量用，而不还给设备，所以分配器持有的显存比张量需要的多。PyTorch 的显存溢出消息会同时报告两个数：已分配的，以及已预留但未分配的。
lesson-allocator-question = 在这一步的峰值，分配器预留的显存是已分配显存的多少倍？
lesson-allocator-answer = 峰值时已分配 { $allocated }，预留 { $reserved }：有 { $cached } 缓存在空闲块中。小到放不下下一个请求的间隙就是碎片。

lesson-fixes-title = 各种技术，一次试一种
lesson-fixes-body = 这一步需要 { $peak }，但预算只有 { $budget }。每种技术都有自己的代价：梯度检查点在反向传播时重新计算每个块的前向传播；融合注意力从不保存注意力概率；混合精度让激活值减半，但要加上 fp32 主权重；梯度累积更频繁地运行更小的 micro-batch。
lesson-fixes-question = 哪一种技术单独使用时，最能降低这一步的峰值？
lesson-fixes-answer = 是“{ $best }”：峰值从 { $before } 降到 { $after }，每步 FLOPs 多 { $flops } %（每个块设梯度检查点要多 { $checkpoint_flops } %）。

lesson-real-title = 从玩具模型到 LLaMA-2 7B，以及 ZeRO
lesson-real-body = 同样的记账方式，用闭式公式套到真实模型上：LLaMA-2 7B 有 { $parameters } 个参数，用 Adam 和 bf16 混合精度全量训练时，每个参数要保存 16 字节的模型状态——还没有任何激活值，单个 GPU 就放不下，超过 A100 的 80 GB。ZeRO（零冗余优化器）把这些状态分片到各个数据并行的 GPU 上。
lesson-real-question = 在 8 个 GPU 上用 ZeRO-3：每个 GPU 上的模型状态缩小为原来的几分之一？
lesson-real-answer = 每个 GPU 上的模型状态从 { $before } 变为 { $after }。

lesson-diagnose-title = 诊断显存溢出
lesson-diagnose-body = 这一步需要的显存超过了 { $budget } 的预算。显存溢出面板原样显示 PyTorch 的消息，再用通俗的话说明哪个 op 申请了多少，并给出修复建议。种子文档的流程：读消息，找出增长的类别，一次只用一种修复，再检查一遍。
lesson-diagnose-question = 消息里点名了放不下的张量。它属于哪一类？
lesson-diagnose-answer = 由 { $op } 申请的「{ $tensor }」属于{ $category }。

lesson-context-title = 长上下文：把序列切开
lesson-context-body = { $model } 训练时的上下文长度是 { $seq } 个 token。这里在 H100 上训练一条这么长的序列：融合注意力、每个块都做梯度检查点、ZeRO-3 分布在 { $gpus } 块数据并行 GPU 上。上下文并行把序列切给几块 GPU：每块保存每个激活值的一份，环形注意力把键（K）和值（V）沿环依次传下去。
lesson-context-question = 至少要几块 GPU 一起切分序列，这一步才放得下？
lesson-context-one = 不用切：一块就放得下
lesson-context-two = 2 块
lesson-context-four = 4 块
lesson-context-eight = 8 块
lesson-context-more = 8 块以上
lesson-context-answer = { $fits } 块 GPU。每块 GPU 的峰值：一块时 { $one }，切给 2 块时 { $two }，4 块时 { $four }，8 块时 { $eight }：每块 GPU 保存按 token 产生的一切的 1/c——激活值、注意力自己保存的张量，还有输出 logits，在这个长度下它们占得最多（每个 token 对整个词表的得分）——而 ZeRO-3 现在把模型状态分摊到数据并行和上下文并行的全部 GPU 上（{ $gpus } × c 块），和 Megatron、DeepSpeed-Ulysses 的做法一样：上下文并行的各块 GPU 持有相同的权重，一起规约梯度。在这个切分下，通信缓冲区（ZeRO 的，以及环上在途的键和值的块）共 { $communication }。
lesson-moe-title = 混合专家模型：Mixtral 8x7B
lesson-moe-body = Mixtral 每层有 { $experts } 个专家 MLP，路由器把每个 token 送到其中 { $k } 个：总共 { $parameters } 个参数。
lesson-moe-question = Mixtral 的模型状态占用的显存，是只有一个 token 所用的 { $k } 个专家的同一模型的多少倍？
lesson-moe-answer = Mixtral 的状态每块 GPU 占 { $states }，只有所用专家的模型占 { $routed_states }：每个专家都有自己的权重、梯度和优化器状态，不管用没用到。激活值几乎一样，{ $activations } 对 { $routed_activations }：一个 token 的激活值只为它经过的专家保存。状态是 470 亿参数的显存，激活值是 130 亿参数模型的。

lesson-fragment-title = 下一个 batch 放得下吗？
lesson-fragment-body = batch { $batch }、序列 { $seq } 的峰值需要 { $peak }，预算是 { $budget }。但缓存分配器并不按散的字节分配：它从段里切出块——不超过 1 MiB 的张量从 2 MiB 的小段里切，更大的从大段里切——而释放的块留在原来的段里、原来的池里缓存着。
lesson-fragment-question = 这一步放得进 { $budget } 吗？
lesson-fragment-fits = 放得下：它需要的比预算少
lesson-fragment-fragmented = 放不下，虽然空闲的总量够：碎成了用不上的块
lesson-fragment-full = 放不下：显存确实满了
lesson-fragment-answer = 真实的一步给出的答案：{ $outcome }
lesson-fragment-outcome-fits = 放得下：分配器在峰值预留 { $peak }，在预算之内。
lesson-fragment-outcome-fragmented = 显存溢出。这一步还要 { $requested }，而缓存的段里空着 { $cached }——但最大的空闲块只有 { $largest }，或者在另一个池里；已预留 { $reserved }，旁边再放不下一个新段。这就是碎片。{ $expandable }
lesson-fragment-outcome-full = 显存溢出：缓存的段里只空着 { $cached }，比申请的 { $requested } 少，已预留 { $reserved }。显存确实满了。{ $expandable }
lesson-fragment-expandable-fits = 在分配器选项里打开可扩展段（PyTorch 的 expandable_segments:True），段按页增长，释放的显存能连成一块：同一步就放得下了，峰值预留 { $reserved }。
lesson-fragment-expandable-oom = 可扩展段救不了这一步：需要更小的 batch 或某种优化技术。
lesson-buckets-title = 显存去哪儿了？
lesson-buckets-body = { $gpus } 块模拟 GPU 用 PyTorch 的 DDP（不切分的数据并行）训练这个模型，每块的 batch 为 { $batch }：每块 GPU 运行的，正是单独一块 GPU 在 { $batch } 条序列上会运行的那一步，它的峰值需要 { $alone }。然后各块 GPU 把梯度相加，让每块 GPU 做同样的优化器更新。
lesson-buckets-question = 这 { $gpus } 块 GPU 中的每一块，峰值是单独一块 GPU 峰值（{ $alone }）的多少倍？
lesson-buckets-answer = 每块 GPU 的峰值是 { $peak }。多出来的几乎全是 DDP 的通信缓冲区：{ $communication }，梯度本身是 { $gradients }。PyTorch 的 DDP 在把各块 GPU 的桶相加之前，先把每个梯度复制进一个桶，而且每个桶在整个训练中只分配一次：这是梯度的第二份副本，只数参数、梯度和优化器状态时会漏掉它。ZeRO-1 和 ZeRO-2 则让梯度经过两个各 { $bucket } 个元素的桶：{ $zero }。
lesson-zero2-title = 在 4 块 GPU 上，ZeRO-2 能省多少？
lesson-zero2-body = { $gpus } 块模拟 GPU 用数据并行训练这个模型。用 DDP 时，每块 GPU 都保存全部模型状态：参数、梯度和 AdamW 的两个状态，每块 GPU 上共 { $ddp }。ZeRO-2 把梯度和优化器状态切成 { $gpus } 份分片，每块 GPU 一份；每块 GPU 仍然运行整个模型。
lesson-zero2-question = 用 ZeRO-2 时，每块 GPU 上模型状态占的显存是用 DDP 时的几分之一？
lesson-zero2-answer = 每块 GPU 上是 { $zero2 }：梯度和优化器状态各只剩 1/{ $gpus }，但每块 GPU 仍然保存全部参数（{ $parameters }），因为它的前向和反向传播都要读它们。所以 ZeRO-2 省下的不到 { $gpus } 倍。ZeRO-3 把参数也切分，每块 GPU 上的状态降到 { $zero3 }，即 DDP 的 1/{ $gpus }，代价是每次使用前都要把这一层的参数收集起来（时间线上标出了每次收集）。
lesson-zero3-title = ZeRO-3 的代价是什么？
lesson-zero3-body = { $gpus } 块模拟 GPU 用 ZeRO-3 训练这个模型：每块 GPU 只保存自己那份参数分片，所以一层运行之前，各块 GPU 要互相把这一层的参数收集到一个缓冲区里，用完再释放。整个模型的参数是 { $parameters }。
lesson-zero3-question = 一个训练步中，每块 GPU 收集的参数是整个模型参数的多少倍？
lesson-zero3-answer = { $gathers } 次收集，共 { $gathered }：每一层的参数在前向传播时收集一次，反向传播时再收集一次（输出层共用的嵌入收集三次），而整个模型的参数是 { $parameters }。这就是 ZeRO-3 只保存 1/{ $gpus } 参数的代价：在真实的集群上，每次收集每一步都要经过网络。单步时间线标出了每次收集。
lesson-padding-title = 长短不一的台词放进一个批次，为什么浪费显存？
lesson-padding-body = 这个批次有 { $batch } 段剧中台词，每段单独占一行，用空白补齐到最长的一段：{ $longest } 个字符。它们一共有 { $useful } 个要预测的字符。打包则会把台词一段接一段放进长度为 { $longest } 个字符的满行里，注意力在每段台词的开头处截止。
lesson-padding-question = 这个补齐的批次占用的激活值显存，是同样的台词打包成满行时的多少倍？
lesson-padding-answer = 补齐时，这一步保存了 { $padded } 的激活值：{ $share }% 的位置是填充，每一个都像真实字符一样被计算和保存。打包成 { $rows } 个同样长度的满行后，同样的台词只需要 { $packed }。长短不一的台词放进一个批次，要为短台词留下的空位付出代价；把长度相近的台词放在一起，或者打包，显存才花在文本上。
lesson-lengths-title = 换了长度之后，下一个 batch 还放得下吗？
lesson-lengths-body = 按长度分桶的 batch，每个有 { $batch } 段台词，长度各不相同：第 1 个 batch 长 { $first } 个字符，第 2 个长 { $next } 个。在一块空的 GPU 上，第 2 个 batch 在峰值需要预留 { $alone }，而这块 GPU 有 { $budget }。但第 2 个 batch 是在第 1 个之后运行的：缓存分配器把第 1 个 batch 释放的显存留在第 1 个 batch 的段里，这些段是按第 1 个 batch 的张量切的；第 2 个 batch 的张量会占用其中的一块块，而分配器只释放完全空闲的段。
lesson-lengths-question = 在第 1 个 batch 之后，第 2 个 batch 放得进 { $budget } 吗？
lesson-lengths-fits = 放得下：它单独放得下，在第 1 个之后也放得下
lesson-lengths-fragmented = 放不下，虽然空闲的总量够：都在第 1 个 batch 留下的碎块里
lesson-lengths-full = 放不下：显存确实满了
lesson-lengths-answer = 真实的运行给出的答案：{ $outcome }
lesson-lengths-outcome-fits = 第 2 个 batch 放得下：峰值预留 { $reserved }。
lesson-lengths-outcome-fragmented = 第 2 个 batch 显存溢出。它申请 { $requested }，而空闲的总量有 { $free }——其中 { $cached } 在缓存的段里，最大的一块只有 { $largest }——它单独运行时只需要 { $alone }。第 1 个 batch 的段有一部分被第 2 个 batch 的张量占着，所以释放不掉，旁边又放不下一个新段：这就是长度变化造成的碎片。
lesson-lengths-outcome-full = 第 2 个 batch 显存溢出：它申请 { $requested }，缓存的段里只空着 { $cached }。显存确实满了。
lesson-lengths-left = 第 1 个 batch 已分配的峰值是 { $allocated }，却留下了 { $reserved } 的预留：长度变化时，预留的显存比已分配的增长得更快。
lesson-lengths-empty-cache = 每个 batch 之后调用 torch.cuda.empty_cache()
lesson-lengths-remedy-fits = 使用 { $remedy }，同样的两个 batch 放得下（第 2 个 batch 峰值预留 { $reserved }，预测）。
lesson-lengths-remedy-oom = 使用 { $remedy }，第 2 个 batch 仍然显存溢出。

## 挑战

challenges = 挑战
challenges-close = 关闭挑战
challenge-start = 开始
challenge-done = 已完成
challenge-active = 当前挑战：{ $title }
challenge-run = 修改设置，然后运行一步：检查用的是真正执行过的那一步。
challenge-passed = 通过：{ $why }
challenge-failed = 还没通过：{ $why }
challenge-best = 目前最好（来自执行过的步）：峰值 { $peak }（{ $source }），每秒 { $rate } 个 token，每步 { $flops } GFLOP（按计划计数）。
challenge-share = 复制这个链接来分享这个挑战：

challenge-accum128-title = 在 32 MiB 内实现 128 的有效 batch
challenge-accum128-goal = 不改变模型和序列长度，在 32 MiB 的预算内，用 128 的有效 batch 训练一步。
challenge-accum128-pass = batch 128 在 { $budget } 的预算内运行，模型和序列长度没有改变。
challenge-accum128-fail = 执行的这一步必须是 batch 128、预算不超过 32 MiB、模型和序列长度与开始时相同（现在：batch { $batch }，预算 { $budget }）。

challenge-halve-title = 用不到 25 % 的额外计算量把峰值减半
challenge-halve-goal = 保持 batch { $batch } 和序列长度 { $seq }；把峰值从 { $peak } 降到一半或更低，额外 FLOPs 少于 25 %（现在每步 { $flops } GFLOP）。
challenge-halve-pass = 峰值为 { $peak }（≤ { $target }），每步 { $flops } GFLOP（≤ { $max_flops }）。
challenge-halve-fail = 峰值为 { $peak }（目标 ≤ { $target }），每步 { $flops } GFLOP（上限 { $max_flops }），batch { $batch }，序列长度 { $seq }。

challenge-largest-title = fp16 下能放进 64 MiB 的最大 batch
challenge-largest-goal = 用 fp16 和 64 MiB 的预算、开始时的序列长度和优化器，不用其他技术，在能放下的最大 batch 上运行一步——在扫描结果告诉你之前找到它。
challenge-largest-pass = batch { $batch } 运行成功，而 batch { $next } 放不下。
challenge-largest-fail = batch { $batch } { $ran ->
        [yes] 运行成功，但 batch { $next } 也放得下
       *[no] 没有在 fp16、64 MiB 预算、开始时的序列长度和优化器、不用其他技术的条件下运行
    }。

## 教师链接

share-button = 分享这个设置
share-title = 分享这个设置
share-help = 勾选学生不能修改的（锁定）或不应看到的（隐藏）控件，然后复制链接。链接还带有设置、语言以及打开的课程章节或挑战。
share-lock = 锁定
share-hide = 隐藏
share-link = 链接：
share-link-fragment = 链接的后半部分：接在网页版的地址后面（例如 https://your-school.example/oomlab/）。
link-unknown-controls = 链接中有 oomlab 不认识的控件（{ $names }），已忽略。

lesson-source = 数字来源：{ $source }。
veil-after-guess = 猜测之后、揭晓答案时显示
veil-fits = 这一步放得进预算吗？答案在揭晓时给出。
veil-chart = 先猜一猜：揭晓答案后显示此图。
veil-note = 标有 ? 的数字在揭晓本章答案时显示：请先猜测。
real-veiled = { $model }，{ $gpu }：估算结果在你猜测之后显示。

## 真实模型：运行时配置与一层保存的张量

real-runtime = 运行时
real-runtime-either = 两者：融合内核 … HF eager
real-runtime-fused = 融合内核（Megatron 风格）
real-runtime-hf = Hugging Face eager 代码
real-measured-context = 在你的 GPU 上测得的 CUDA 上下文（MiB）
real-measured-fragmentation = 在你的 GPU 上测得的碎片（%）
real-range = 融合内核：{ $fused }（{ $fused-verdict }）。Hugging Face eager 代码：{ $hf }（{ $hf-verdict }）。
real-range-fits = 放得下
real-range-oom = 放不下
real-range-split = 用融合内核放得下，用 HF eager 放不下：请选择你实际训练所用的运行时。
real-saved-heading = 一层为反向传播保存的张量
real-saved-profile = { $runtime }配置，每个 GPU：
real-saved-kind-experts = 带专家混合的 { $count } 层，每层
real-saved-kind-experts-nope = 带专家混合、无 RoPE 的 { $count } 层，每层
real-saved-kind-dense = { $count } 个稠密层，每层
real-saved-kind-dense-nope = 无 RoPE 的 { $count } 个稠密层，每层
real-saved-outside = 层之外

## 保存的张量，按名称

saved-gelu-input = GELU 的输入
saved-gelu-output-the-second-linears-input = GELU 的输出（第二个线性层的输入）
saved-latent-norms = 潜在注意力的归一化与上投影的输入
saved-layernorm-input = LayerNorm 的输入
saved-layernorm-mean-and-rstd-fp32-on-cuda = LayerNorm 的均值与 rstd（CUDA 上为 fp32）
saved-mlp-dropout-mask = MLP 的 dropout 掩码
saved-rmsnorms-fp32-copy-of-its-input = RMSNorm 输入的 fp32 副本
saved-rmsnorms-normalised-input-cast-back-for-the-weights-gradient = RMSNorm 归一化后转回原精度的输入（用于权重的梯度）
saved-rmsnorms-normalised-input-fp32 = RMSNorm 归一化后的输入（fp32：先乘权重再转回）
saved-rmsnorms-rsqrt-fp32 = RMSNorm 的 rsqrt（fp32）
saved-attention-dropout-mask = 注意力的 dropout 掩码
saved-attention-output-the-output-projections-input = 注意力输出（输出投影的输入）
saved-attention-probabilities-softmax-output = 注意力概率（softmax 的输出）
saved-dropped-probabilities = dropout 之后的概率
saved-dropped-probabilities-the-output-matmuls-input = dropout 之后的概率（输出 matmul 的输入）
saved-embedding-dropout-mask = 嵌入层的 dropout 掩码
saved-final-layernorm-input = 最后一个 LayerNorm 的输入
saved-final-layernorm-mean-and-rstd = 最后一个 LayerNorm 的均值与 rstd
saved-final-rmsnorms-fp32-copy-of-its-input = 最后一个 RMSNorm 输入的 fp32 副本
saved-final-rmsnorms-normalised-input-cast-back = 最后一个 RMSNorm 归一化后转回原精度的输入
saved-final-rmsnorms-normalised-input-fp32 = 最后一个 RMSNorm 归一化后的输入（fp32）
saved-final-rmsnorms-rsqrt = 最后一个 RMSNorm 的 rsqrt
saved-final-norm-input-the-last-blocks-output = 最后归一化层的输入（最后一个块的输出）
saved-final-norm-output-lm-heads-input = 最后归一化层的输出（lm_head 的输入）
saved-final-norm-statistics-fp32 = 最后归一化层的统计量（fp32）
saved-gate-and-up-outputs-silu-gate = gate 与 up 的输出、silu(gate)
saved-gate-projection-output-silus-input = gate 投影的输出（silu 的输入）
saved-gelu-news-0-5-x = gelu_new 的 0.5·x
saved-gelu-news-1-tanh = gelu_new 的 1 + tanh(…)
saved-gelu-news-tanh = gelu_new 的 tanh(…)
saved-gelu-news-x-the-first-linears-output = gelu_new 的 x（第一个线性层的输出）
saved-key-repeated-to-every-head-as-the-score-matmul-keeps-it = key，复制到每个头（打分 matmul 保存的形式）
saved-block-input-the-q-k-v-projections-input = 块的输入（q/k/v 投影的输入）
saved-residual-sum-the-mlps-input = 残差和（MLP 的输入）
saved-multi-token-prediction = 多 token 预测模块：其归一化层、投影、块、最后的归一化层和输出头的输入
saved-norm-input-the-blocks-input = 归一化层的输入（块的输入）
saved-norm-output-the-mlps-input = 归一化层的输出（MLP 的输入）
saved-norm-output-the-next-linears-input = 归一化层的输出（下一个线性层的输入）
saved-norm-output-the-q-k-v-projections-input = 归一化层的输出（q/k/v 投影的输入）
saved-norm-statistics-fp32 = 归一化层的统计量（fp32）
saved-position-ids-the-position-embeddings-indices-int64 = 位置 id（位置嵌入的索引，int64）
saved-probabilities-cast-back-the-output-matmuls-input = 转回原精度的概率（输出 matmul 的输入）
saved-query-as-the-score-matmul-keeps-it = query（打分 matmul 保存的形式）
saved-query-key-value = query、key、value 三者
saved-query-key-value-full-heads = query、key、value（全部的头）
saved-query-a-view-keeping-c-attns-whole-output-micro-batch-1 = query：一个让 c_attn 的整个输出保持存活的视图（micro-batch 为 1）
saved-residual-dropout-mask = 残差的 dropout 掩码
saved-rotary-cos-and-sin-tables = 旋转位置编码的 cos 与 sin 表
saved-row-logsumexp-fp32 = 每行的 logsumexp（fp32）
saved-second-norms-input-the-residual-sum = 第二个归一化层的输入（残差和）
saved-silu-gate = silu(gate) 的结果
saved-silu-gate-up-the-down-projections-input = silu(gate) · up（down 投影的输入）
saved-up-projection-output = up 投影的输出
saved-value-repeated-to-every-head-as-the-output-matmul-keeps-it = value，复制到每个头（输出 matmul 保存的形式）
saved-gemma-rmsnorms-normalised-input-fp32 = Gemma RMSNorm 的归一化输入（fp32）
saved-gemma-rmsnorms-scale-one-plus-weight-fp32 = Gemma RMSNorm 的缩放 1 + weight（fp32）
saved-query-and-key-norms-fp32 = query 和 key 的归一化：fp32 副本和 rsqrt
saved-query-and-key-norms-normalised = query 和 key 的归一化：归一化后的 query 和 key
saved-attention-scores-tanh-softcap = 注意力分数的 tanh（软上限）
saved-sandwich-norms = 注意力和 MLP 输出上的归一化（fp32）
saved-gate-projection-output-gelus-input = gate 投影输出（GELU 的输入）
saved-gelu-gate = gelu(gate) 的结果
saved-gelu-gate-up-the-down-projections-input = gelu(gate) · up（down 投影的输入）
saved-gate-and-up-outputs-gelu-gate = gate 和 up 的输出，gelu(gate)
saved-row-max-indices-int64 = 每行得分最大值的索引（int64）
saved-attention-probabilities-with-the-sink = 含 sink 列的注意力概率（softmax 输出）
saved-router-top-k-softmax = 路由器对其 top-k 的 softmax
saved-routing-weights-in-the-activations-dtype = 路由权重（激活值的精度）
saved-expert-clamped-swiglu = 专家的截断 SwiGLU：截断后的 gate 和 up、σ(α·gate)、gate·σ、up + 1
saved-tokens-weighted-for-every-expert = 每个 token 为每个专家复制一份，带其得分（专家的输入）
saved-query-temperature-scales = query 的温度缩放（fp32，每个位置一个）
saved-router-input-and-weight-in-fp32 = 路由器的输入和权重（fp32）
saved-router-probabilities-fp32 = 路由器概率（softmax，fp32）
saved-router-scores-sigmoid-fp32 = 路由器得分（sigmoid，fp32）
saved-router-top-k-indices-int64 = 路由器选出的 top-k 专家索引（int64）
saved-router-top-k-weights-fp32 = 路由器的 top-k 权重及其和（fp32）
saved-expert-sort-indices = 按专家排序的 token：索引和偏移
saved-tokens-gathered-for-their-experts = 复制给各自 k 个专家的 token（专家的输入）
saved-expert-gate-and-up-outputs = 专家的 gate 和 up 输出
saved-expert-activation-gate = 专家对 gate 的激活
saved-expert-gate-up-the-down-projections-input = 专家的 act(gate) · up（down 投影的输入）
saved-routing-weights = 路由权重（fp32）
saved-expert-outputs-for-the-weighted-sum = 专家的输出（用于加权求和）
saved-shared-expert-mlp = 共享专家的 MLP：gate、act(gate)、up、乘积
saved-shared-expert-gate-and-output = 共享专家的 sigmoid 门和输出
saved-final-norm-gemma = 最后的 Gemma RMSNorm：fp32 副本、rsqrt、归一化输入、缩放
src-pipeline = 流水线调度 { $schedule }（Narayanan 等 2021）：本阶段还有 { $count } 个 micro-batch 的激活值在途
src-pipeline-p2p = 流水线并行的发送和接收缓冲区：阶段边界上一个 micro-batch 的 s·b·h，两个方向各一份
src-context-ring = 上下文并行，RingAttention（Liu 等 2023）：环上在途的键（K）和值（V）块，本 GPU 发出的一份和接收的下一份（各 s/c 行）
src-context-ulysses = 上下文并行，DeepSpeed-Ulysses（Jacobs 等 2023）：q、k、v 的 all-to-all 发送和接收缓冲区
src-all-to-all = 专家并行的 all-to-all（GShard，Lepikhin 等 2020）：每块 GPU 的 s·b·k 个 token 副本的发送和接收缓冲区
src-pytorch-amp = PyTorch AMP（torch.autocast + GradScaler）：模型保持 fp32，用 Adam 时每个参数 4 + 4 + 8 字节，没有主权重副本
src-deepspeed = DeepSpeed 的 ZeRO 优化器（stage_1_and_2.py、stage3.py）：16 位权重和梯度，权重的 fp32 分片及其上的 Adam 状态
src-megatron = Megatron-LM 的理论显存报告（theoretical_memory_usage.py）：bf16 权重旁的 fp32 主梯度，每个参数 18 字节；其分布式优化器为 6 + 12/DP
src-fsdp2 = PyTorch FSDP2（fully_shard，MixedPrecisionPolicy bf16/fp32）：fp32 参数和梯度分片，Adam 在分片上更新，每个参数 16 字节分到各 GPU
src-autocast = torch.autocast 在前向中缓存每个线性层权重的 16 位副本，矩阵乘法把它保存到反向：每个线性层权重 2 字节

## 快照标签页：PyTorch 显存快照

tab-snapshot = 快照
source-pytorch = 由 PyTorch 测得
source-oomlab-export = 由 oomlab 的分配器写出（导出文件，并非 PyTorch 的测量）
snap-heading = PyTorch 显存快照
snap-how = 在训练脚本中用 torch.cuda.memory._record_memory_history() 和 torch.cuda.memory._dump_snapshot("snap.pickle") 记录一份显存快照，或用以下命令导出 oomlab 自己的一步：oomlab snapshot export --out step.pickle
snap-path = snap.pickle 的路径
snap-open = 打开
snap-choose = 选择文件…
snap-drop = 或把文件拖到此窗口（拖入多个文件可进行比较）
snap-reading = 正在读取 { $name }…
snap-error = 无法打开 { $name }：{ $error }
snap-error-foreign = 这不是 PyTorch 显存快照（{ $detail }）
snap-error-corrupt = 快照已损坏（{ $detail }）
snap-error-write = 无法写入快照（{ $detail }）
snap-error-unreadable = 无法读取该文件（{ $detail }）
snap-error-empty-folder = 该文件夹中没有 .pickle、.pkl 或 .json 文件
snap-device = { $n } 号 GPU
snap-source = { $name }，设备 { $device }：{ $source }
snap-truncated = 记录开始时已有 { $allocated } 已分配、{ $reserved } 预留：记录是在运行中途开始的，或环形缓冲区丢弃了最早的事件（记录被截断）。
snap-oom-heading = 显存溢出
snap-oom = 在第 { $index } 个事件处，PyTorch 申请 { $size }，而设备上只有 { $free } 空闲（{ $frame }）。
snap-oom-fragmented = 缓存的空闲显存（{ $cached }）本可容纳它，但其中最大的空闲块只有 { $largest }：显存已碎片化。PyTorch 的办法：PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True。
snap-oom-full = 各段中共有 { $cached } 空闲，最大的空闲块为 { $largest }：显存确实满了——减小 batch、使用梯度检查点或混合精度才能解决。
snap-live = 峰值时存活的 { $count } 个最大分配
snap-no-frame = （没有记录调用栈）
snap-col-snapshot = 这份快照
snap-col-toy = 玩具模型的一步
snap-col-toy-source = 玩具模型的一步（{ $source }）
snap-peak-allocated = 已分配峰值
snap-peak-reserved = 预留峰值
snap-largest-free = 结束时最大的空闲块
snap-free = 结束时各段中的空闲
snap-fragmentation = 结束时的碎片（最大空闲块之外的空闲显存）
snap-events = 分配器事件数
snap-no-trace = 这份快照没有事件记录：只有导出时的各个段。
snap-allocated = 已分配
snap-oom-line = 显存溢出
snap-axis-event = 事件
snap-map = 导出时分配器的段（显示 { $shown } / { $count } 个，从大到小）：已分配的块为实心，空闲部分为空
snap-segment = 段 { $address }：{ $size }，{ $allocated } 已分配，共 { $blocks } 个块
snap-segment-private = 属于私有池 { $pool }（CUDA graph 或 MemPool 的）：只有它自己的申请使用它。
snap-segment-expandable = 可扩展段：按页增长和收缩。
snap-scrub = 拖动到某个事件
snap-alive-at = 第 { $index } 个事件之后：{ $count } 个分配中存活 { $bytes }
snap-holding-peak = 峰值时是什么占满了显存（第 { $index } 个事件）
snap-holding-oom = 显存溢出时是什么占满了显存（第 { $index } 个事件）
snap-holding-at = 第 { $index } 个事件之后存活的内容
snap-holding-how = 按申请显存的位置分组（torch 和标准库之外的第一个 Python 帧，以及其 C++ 帧所指的算子），并按其中存的内容分类：根据每次分配的生命周期对照这次运行的各个阶段判断，否则根据调用栈猜测（标有 ?）。
snap-holding-known = oomlab 自己导出的快照标明了每个块的类别：这些不是猜测。
snap-holding-total = { $count } 个分配共 { $bytes }
snap-holding-row = { $count } 个共 { $bytes }：{ $guess } — { $site }
guess-parameters = 参数
guess-optimizer = 优化器状态
guess-gradients = 梯度
guess-activations = 激活值
guess-other = 其他
guess-temporaries = 临时张量
guess-parameters-and-state = 参数和优化器状态
place-none = 没有记录调用栈
place-no-python = 没有 Python 帧
place-no-python-op = 没有 Python 帧（{ $op }）
place-frame-op = { $frame }（算子 { $op }）
place-op-in-node = { $node } 中的 { $op }
place-called-from = { $place }，调用自 { $caller }
evidence-oomlab = 由 oomlab 的导出标明
evidence-before-recording = 记录之前：记录开始前就已存活且从未释放（模型的参数或输入）
evidence-before-recording-with-state = 记录之前：记录开始前就已存活且从未释放；记录下的优化器步没有创建状态，所以之前各步的优化器状态也在其中
evidence-backward-into-step = 在反向传播中创建，存活到优化器步
evidence-backward-to-end = 在反向传播中创建，到记录结束时仍存活
evidence-step-and-after = 在优化器步中创建，之后仍存活
evidence-forward-to-backward = 在前向传播中创建，在反向传播中释放
evidence-forward-to-end = 在前向传播中创建，到记录结束时仍存活
evidence-within-phase = 在同一阶段内创建并释放
evidence-stack = 根据调用栈猜测
fix-temporaries = 针对临时张量的办法：融合的内核（torch.compile）、原地操作、更小的微批次；它们只存活在一个阶段内，峰值出现在它们堆积的地方。
fix-parameters-and-state = 针对参数和优化器状态的办法：用 FSDP 或 ZeRO 分片、8 位优化器、混合精度、LoRA（冻结的基座没有优化器状态）。从第一步开始记录，才能把两者分开。
phase-forward = 前向
phase-backward = 反向
phase-optimizer = 优化器步
phase-zero-grad = 梯度清零（zero_grad）
guess-mark = { $what }（猜测）
snap-advice-heading = 诊断流程
advice-capacity = 峰值（{ $peak }）占设备 { $capacity } 的 { $percent } %（预留量加上显存溢出时驱动报告的空闲量）。
advice-capacity-over = 超过 90 %：先按模块分析（见上表），再针对增长最多的部分下手。
advice-fragmented = 缓存的段中有 { $free } 空闲，多于申请的 { $request }，但不是连续的一块：问题是碎片，而不是大小（可试 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True）。
advice-grew = 自记录开始以来增长最多的是：{ $what }（+{ $bytes }）。
advice-where = 其中大部分在 { $place } 创建（+{ $bytes }）。
fix-parameters = 针对参数的办法：混合精度或 bf16 权重、FSDP 或 ZeRO-3 分片、LoRA 或 QLoRA（冻结的、更小的基座）。
fix-optimizer = 针对优化器状态的办法：用 ZeRO-1/2 或 FSDP 分片、用 ZeRO-Offload 卸载到 CPU、8 位或因子化的优化器。
fix-gradients = 针对梯度的办法：用 ZeRO-2 或 FSDP 分片、用 bf16 存梯度、累加到同一个缓冲区。
fix-activations = 针对激活值的办法：对各块做梯度检查点、更小的微批次配合梯度累积、融合（flash）注意力、更短的序列。
fix-other = 查看列出的帧：被保留的输入、不断增长的张量列表、缓存。
snap-progress = 正在读取 { $name }：{ $done } / { $total }
snap-too-large = { $name } 有 { $size }：超过浏览器标签页能读取的 { $limit }。请在桌面上用以下命令汇总：oomlab snapshot show { $name }
snap-add = 并排打开
snap-add-file = 添加文件…
snap-recorded-with = 记录时 PYTORCH_CUDA_ALLOC_CONF={ $conf }
snap-conf-unset = （未设置）
snap-no-settings = 文件没有写明这次运行的分配器设置（较旧的 PyTorch）。
snap-recording-heading = 文件中关于这次记录的信息
snap-unlimited = 不限
snap-settings = PyTorch 解析后的设置：expandable_segments { $expandable }，max_split_size { $split }，garbage_collection_threshold { $gc }
snap-settings-power2 = 设置了 roundup_power2_divisions：PyTorch 把申请向上取整到 2 的幂，oomlab 的分配器不这样做。
snap-annotations = { $count } 个 record_function 标注（{ $names } 种名称：{ $first } …）
snap-metadata = 带有用户元数据的事件：{ $count } 个（第 { $index } 个事件：{ $text }）
snap-private-pools = 私有池（CUDA graph、MemPool）：{ $pools } 个池中共 { $segments } 个段，预留 { $reserved }
snap-expandable = 可扩展段：导出时 { $segments } 个；跟踪中映射 { $maps } 次，取消映射 { $unmaps } 次
snap-unknown-none = 文件中没有 oomlab 不认识的内容。
snap-unknown-actions = oomlab 不认识的动作（较新的 PyTorch 写的），已计数并跳过：{ $list }
snap-unknown-keys = oomlab 不认识的键，已计数并跳过：{ $list }
snap-phases = 这次运行的各个阶段：
snap-phase-named = 一个 record_function 区间
snap-phase = { $phase }：第 { $first }–{ $last } 个事件（{ $source }）
snap-phase-annotation = 来自运行中的标注
snap-phase-stacks = 来自调用栈
snap-phase-more = 以及另外 { $count } 个
snap-replayed-line = 预留，由 oomlab 的分配器重放
chart-snapshot-phases = 阶段：{ $phases }。
chart-snapshot-replayed = 经 oomlab 的分配器重放，预留峰值 { $peak }。
snap-replay-heading = 用 oomlab 的分配器重放这次运行
snap-replay-how = 把这次运行的分配和释放按顺序交给 oomlab 的缓存分配器（PyTorch 的规则），从记录开始时存活的段出发。用运行自己的设置，它的段会原样重现；换用其他设置，就能看到这次运行本会预留多少显存。
snap-replay-own-hint = 运行自己的设置
snap-replay-conf = 分配器设置（PYTORCH_CUDA_ALLOC_CONF）：
snap-replay-memory = GPU 显存（garbage_collection_threshold 需要）：
snap-replay-run = 重放
snap-replay-error = 无法重放：{ $error }
snap-replay-defaults = PyTorch 的默认值
snap-replay-with-own = 用运行自己的设置重放（{ $conf }）
snap-replay-with = 用 PYTORCH_CUDA_ALLOC_CONF={ $conf } 重放
snap-replay-real = 真实运行
snap-replay-replayed = 重放
snap-replay-segments = 跟踪期间预留的段
snap-replay-released = 跟踪期间释放的段
snap-replay-largest = 已分配峰值时最大的空闲块
snap-replay-agrees = 重放的预留峰值与运行相差 { $percent } %：oomlab 的分配器像 PyTorch 一样放置了这次运行的块。
snap-replay-would = 这次运行的峰值本会预留 { $replayed }，而不是 { $real }。
snap-replay-releases = 这次运行释放了 { $count } 次缓存的段（torch.cuda.empty_cache()，或在 cudaMalloc 失败后重试之前）：重放也在相同的事件处这样做。
snap-replay-ooms = 显存溢出：运行中 { $real } 次，重放中 { $replayed } 次。
snap-replay-power2 = 这次运行用 roundup_power2_divisions 对申请取整，oomlab 的分配器不遵循它：结果会有差异。
snap-replay-bad-memory = { $value } 不是一个大小（试试 80GiB）
snap-replay-needs-memory = garbage_collection_threshold 是 GPU 显存的一个比例，而这个文件没有写明 GPU 有多少显存：请给出（80GiB）。
snap-several-heading = 并排的 { $count } 个快照
snap-several-how = 每个文件的峰值，由 PyTorch 测得。名为 rank0、rank1 … 的文件视为同一次运行的各个 rank。峰值时存活的内容加起来正好是峰值，所以下面的差值加起来就是差距。
snap-several-rank = rank（进程）
snap-several-file = 文件
snap-several-line = rank（进程）{ $rank }：{ $file }，已分配峰值 { $allocated }，预留峰值 { $reserved }
snap-several-worst = 最高
snap-several-show = 完整显示
snap-several-close = 关闭其他文件
snap-several-spread = { $worst } 的峰值比 { $best } 高 { $spread }：比所有文件的平均值高 { $percent } %。
snap-several-extra = 峰值时多出的显存去了哪里（从 { $best } 到 { $worst }）：
snap-several-kind = { $kind }：从 { $a } 到 { $b }（{ $change }）
snap-several-place = { $change }：{ $place }（从 { $a } 到 { $b }）

## 课堂：学生页面（oomlab serve，/join）

student-title = oomlab 课堂
student-intro = 老师正在投影仪上运行 oomlab。先和全班一起猜，再看真实的显存给出的答案。
student-code = 课堂代码
student-name = 你的名字（可不填；只有老师能看到）
student-join = 加入课堂
student-joined = 你已加入课堂。请保持此页面打开。
student-waiting = 正在等待老师提问…
student-question = 第 { $chapter } 题
student-number = 你的猜测（一个数字）
student-send = 提交我的猜测
student-sent = 已提交：{ $answer }。公布答案之前都可以修改。
student-not-sent = 尚未提交。
student-answer = 答案：{ $answer }
student-yours = 你的猜测：{ $answer }
student-off-by = 你与答案相差 { $percent } %。
student-round-two = 第二轮：和同桌讨论这个问题，然后再投一次。
student-vote = 你第 { $round } 轮的投票：{ $answer }
student-history = 你目前的答案
student-history-number = 第 { $chapter } 章：你答 { $yours }，答案是 { $answer }，相差 { $percent } %。
student-history-choice = 第 { $chapter } 章：你选“{ $yours }”，答案是“{ $answer }”：{ $verdict }
student-right = 答对了！
student-wrong = 这次没猜中。
student-none = 你没有回答这道题。
student-closed = 课堂已结束。谢谢！
student-no-class = 没有这个代码的课堂。请核对投影仪上的代码。
student-bad-code = 课堂代码由 6 个字母和数字组成。
student-too-fast = 提交太频繁：请稍等片刻再提交。
student-revealed-already = 答案已公布：这道题不再接受猜测。
student-offline = 与课堂的连接已断开，正在重试…
student-refused = 课堂服务器拒绝了这个请求（{ $status }）。
student-locked = 课堂已锁定：老师现在不允许其他人加入。
student-join-busy = 这个网络同时加入的次数太多：请等一分钟再试。
student-name-invalid = 这个名字不能使用：只能有文字、数字、表情符号和单个空格，最多 40 个字符。
student-let-in = 请等待老师允许你进入：课堂暂时已满，由老师决定。
student-removed = 老师已将你移出课堂。如果课堂仍开放，你可以重新加入。

## 欢迎页：三种开始方式

welcome-title = 欢迎使用 oomlab
welcome-intro = batch 过大为何会导致显存溢出？oomlab 在这台电脑的 GPU 上训练一个小型 GPT，并统计每个训练步的每一个字节。
welcome-lessons = 开始课程
welcome-lessons-note = { $chapters } 个短章节：先猜，再由真实的一步给出答案。
welcome-explore = 自由探索
welcome-explore-note = 所有控件和视图，从一个合理的初始设置开始。
welcome-teach = 课堂教学
welcome-teach-note = 配合 oomlab serve：学生在手机上作答，投影仪显示全班的猜测，然后由真实的一步给出答案。

## 课堂教学（oomlab serve 的教师端）

# The top bar's toggle of the class panel (short: it sits beside Lessons and Challenges).
class-toggle = 课堂
class-title = 课堂教学
class-hide = 隐藏
class-intro = 先在这台电脑上运行 oomlab serve，再在这里开始课堂。学生用手机加入；你打开的每个课程章节都会成为他们的题目，揭晓时答案会发送给他们。
class-server = 课堂服务器
class-start = 开始课堂
class-starting = 正在开始课堂…
class-code = 课堂代码：{ $code }
class-join-at = 学生：打开 { $url } 或扫描二维码
class-joined = 已有 { $students } 名学生加入 · { $answered } 人回答了这道题
class-ended = 课堂已结束。答案会保留在服务器上，直到课堂过期。
class-question = 第 { $chapter } 题：{ $text }
class-no-question = 打开一个课程章节：它的题目会发给全班。
class-guesses = 全班的猜测（不显示姓名）
class-second-round = 第二轮投票
class-second-round-note = 第一轮的分布留在屏幕上，但不显示答案；每位学生和同桌讨论后再投一次。
class-split = 全班意见有分歧：让想法不同的同桌互相说服，然后开始第二轮投票。
class-round-two = 第二轮：和同桌讨论，然后再投一次。
class-round = 第 { $round } 轮
class-no-guesses = 还没有人作答。
class-axis-students = 学生
class-axis-guess = 猜测
class-axis-answer = 答案
class-revealed = 真实的一步给出的答案：{ $answer }
class-planned = 计划的预测：{ $answer }
class-setting = 设置：{ $what }
class-setting-toy = 玩具 GPT-2（{ $model }），batch { $batch }，序列 { $seq }，预算 { $budget }，{ $techniques }
class-setting-real = { $model }，在 { $gpus } 上
class-projector = 投影视图（全屏）
class-projector-note = 为教室后排准备的课堂视图：题目字号更大，答案分布占半个屏幕以上。点“返回”回到应用。
class-projector-back = ‹ 返回应用
class-loopback = 学生无法打开这个地址：它指向这台电脑自己。请用 --public-url 加上这台笔记本在课堂网络中的地址重新启动 oomlab serve。
chart-projector = 第 { $round } 轮：{ $answers } 个答案。{ $slots }。
projector-median = 中位数 { $median }
projector-middle = 中间一半（黄色）{ $low }–{ $high }
projector-answer = 答案 { $answer }
projector-within = { $count } 个中有 { $within } 个在 ±{ $percent } % 以内
class-csv = 下载答案（CSV）
class-end = 结束课堂
class-unreachable = { $server } 上没有课堂服务器应答。请在这台电脑上运行：oomlab serve
class-unreadable = { $server } 上的服务器有应答，但它不是 oomlab 课堂服务器。
class-gone = 服务器上已没有这个课堂：它已过期，或服务器丢失了数据库。请开始新的课堂。
class-not-yours = 课堂服务器不接受这台电脑对这个课堂的教师密钥。
class-moved-on = 课堂服务器拒绝了这个请求：课堂已在另一道题上，或已结束。
class-invalid = 课堂服务器认为这道题无效。
class-busy = 课堂服务器正忙或正在停止：请稍后再试。
class-not-saved = 课堂服务器已无法保存：它运行时数据库文件被删除或替换了。已保存的内容随文件一起丢失；请重新启动服务器。
class-failed = 课堂服务器出错（{ $status }）。
class-key = 教师密钥
class-key-note = 仅当课堂服务器运行在另一台电脑上时需要：填写它启动时打印的密钥。在服务器所在的电脑上请留空。
class-expected = 预计人数
class-expected-note = 0：任何人都可以加入。超过这个人数后，学生需要等你允许才能进入。
class-key-needed = 这个课堂服务器只允许它所在的电脑，或持有其密钥的老师开始课堂：请填写它启动时打印的密钥。
class-flood = 加入的速度比一个班级打字还快：{ $seconds } 秒内 { $joins } 次。如果这不是你预料的，请锁定课堂并检查学生名单。
class-flood-expected = 有 { $waiting } 名学生在等待，超过了你预计的 { $expected } 人。如果这不是你预料的，请移除所有等待中的学生并锁定课堂。
class-lock = 锁定课堂：不再允许其他人加入
class-waiting = { $waiting } 名学生正在等待你允许进入。
class-admit-all = 全部允许进入
class-remove-waiting = 移除所有等待中的学生
class-remove-waiting-lock = 移除所有等待中的学生并锁定课堂
class-students = 学生及其名字（不要投影）
class-no-students = 还没有学生。
class-student = { $number } 号：{ $name }
class-no-name = （无名字）
class-student-waiting = 等待允许进入
class-student-answers = { $answers } 个答案
class-admit = 允许进入
class-remove = 移除
class-remove-student = 移除 { $student }
class-admit-student = 允许 { $student } 进入

## 图表的描述，供屏幕阅读器使用（由图表所画的数字算出）
chart-batch = { $name }，峰值显存与 batch 大小：batch { $batch } 时为 { $peak }，其中{ $largest }占 { $share } %；batch { $oom } 时达到 { $capacity } 的{ $capacity_name }。
chart-batch-fits = { $name }，峰值显存与 batch 大小：batch { $batch } 时为 { $peak }，其中{ $largest }占 { $share } %；图中每个 batch 都放得进 { $capacity } 的{ $capacity_name }。
chart-batch-oom = { $name }，峰值显存与 batch 大小：batch { $batch } 放不进 { $capacity } 的{ $capacity_name }；从 batch { $oom } 起显存溢出。
chart-batch-range = { $name }，峰值显存与 batch 大小：batch { $oom } 时达到 { $capacity } 的{ $capacity_name }。
chart-loss = { $steps } 步的损失：第一步 { $first }，最后一步 { $last }。
chart-loss-none = 损失曲线：还没有训练步。
train-memory-heading = 每一步之后的显存（分配器，实时）
train-memory-allocated = 已分配的峰值
train-memory-reserved = 这一步之后的预留
train-axis-mib = 显存 (MiB)
chart-step-memory = { $steps } 步的显存：第一步之后预留 { $first }，最后一步之后预留 { $last }；已分配的峰值最高 { $allocated }。
chart-step-memory-none = 每一步之后的显存：还没有训练步。
chart-snapshot = 跟踪中 { $events } 个事件的显存：已分配峰值 { $peak }，在第 { $at } 个事件；预留峰值 { $reserved }；{ $ooms } 次显存溢出。
chart-snapshot-scrub = 标记处：第 { $index } 个事件之后，已分配 { $bytes }。
chart-class-number = 全班的猜测：共 { $count } 个，从 { $low } 到 { $high }，中位数 { $median }。
chart-class-choice = 全班的猜测，每个选项的学生人数：{ $counts }。
live-step = 第 { $n } 步完成：峰值已分配 { $peak }（{ $source }）。
legend-stacked = 自下而上堆叠：

## 估算器为何拒绝一个设置或一个 config.json（应用里，以及命令行的错误信息；`estimate::error`）

est-err-out-of-range = { $what } 必须在 1 到 { $max } 之间（当前为 { $value }）
est-err-at-most = { $what } 最多为 { $max }（当前为 { $value }）
est-err-unknown-precision = 未知的精度 { $got }：可选 fp32、fp16、bf16（混合精度）或 pure-bf16
est-err-unknown-optimizer = 未知的优化器 { $got }：可选 sgd、momentum 或 adam
est-err-sequence-beyond-positions = 序列长度 { $seq } 超过了 { $model } 的位置表（{ $positions }）
est-err-tensor-parallel-divide = 张量并行数 { $t } 必须整除注意力头数（{ $heads }）、键/值头数（{ $kv }）和 MLP 宽度（{ $ffn }）
est-err-expert-parallel-mixture = 专家并行 { $ep } 需要混合专家模型
est-err-expert-parallel-divide = 专家并行数 { $ep } 必须整除专家数（{ $experts }）和数据并行 GPU 数（{ $data }）：专家并行的 GPU 就是数据并行的那些
est-err-lora-experts = 不支持对混合专家模型的专家做 LoRA：请改为适配注意力层（qkv、proj）
est-err-sequence-parallel-divide = 序列并行把序列（{ $seq }）切给 { $t } 块 GPU：必须能整除
est-err-measured-context = 实测的 CUDA 上下文 { $bytes } 字节，比任何 GPU 的显存都大
est-err-measured-fragmentation = 实测的碎片比例必须在 0 到 1000 % 之间（当前为 { $percent }）
est-err-zero-stage = ZeRO 只有 0 到 3 阶段（当前为 { $stage }）
est-err-gradient-offload = 卸载梯度需要同时卸载优化器状态（优化器的那一步必须在梯度所在的地方运行）
est-err-parameter-offload = 卸载参数需要 ZeRO 阶段 3（它卸载的是参数分片）
est-err-checkpoint-every = 梯度检查点 every:{ $k } 要求 1 <= K <= 层数（{ $layers }）
est-err-profile-full-training = { $framework } 框架的模型只算不卸载的全量训练（LoRA 和卸载请选 zero 或 deepspeed 框架）
est-err-amp-precision = pytorch-amp 是混合精度：请选 bf16 或 fp16
est-err-amp-zero = pytorch-amp 是普通的数据并行：ZeRO 阶段属于 deepspeed 或 fsdp2
est-err-megatron-zero = Megatron 的分布式优化器切分优化器状态和主权重（--zero 1）；要 ZeRO-2 或 3，请选 deepspeed 或 fsdp2
est-err-fsdp2-zero = fsdp2 切分参数、梯度和优化器状态：即 ZeRO 阶段 3
est-err-lora-rank = LoRA 秩必须在 1 到 hidden - 1 之间（当前为 { $rank }）
est-err-lora-no-target = LoRA 至少需要一个目标投影层
est-err-dropout = dropout 是一个概率，从 0 到 1（不含 1）（当前为 { $value }）
est-err-heads-divide = 隐藏维度（{ $h }）必须能被注意力头数（{ $heads }）整除
est-err-kv-heads-divide = 分组查询注意力要求注意力头数（{ $heads }）是 kv_heads（{ $kv }）的整数倍
est-err-too-many-parameters = { $model } 的参数超过 2^56 个：超出了 oomlab 的计数范围
est-err-top-k = top_k（{ $k }）不能多于专家数（{ $experts }）
est-err-experts-not-gated = 估算器的专家是门控 MLP（SwiGLU 或 GeGLU）
est-err-no-mixture-layer = { $model } 没有一层带混合专家
est-err-dense-width = 混合专家层之间的稠密层需要给出它们的 MLP 宽度
est-err-pipeline-stages = 流水线阶段数必须在 1 到层数（{ $layers }）之间（当前为 { $p }）
est-err-interleaved-chunks = 交错式调度每阶段的块数必须在 2 到 64 之间（当前为 { $v }）
est-err-interleaved-divide = 交错式调度需要不止一个阶段，并且层数（{ $layers }）能被 阶段数 × 块数（{ $p } × { $v }）整除
est-err-context-divide = 上下文并行把序列（{ $seq }）切给 { $c } 块 GPU：必须能整除
est-err-context-fused = 上下文并行运行在融合注意力之上（环形注意力和 Ulysses 都建立在它上面）：请选融合注意力（--attention fused）
est-err-ulysses-heads = Ulysses 把注意力头（{ $heads }）和键/值头（{ $kv }）分给上下文并行的 GPU（{ $c } 块，张量并行为 { $t }）：必须能整除
est-err-no-model-preset = 没有名为 { $name } 的模型预设
est-err-no-gpu-preset = 没有名为 { $name } 的 GPU 预设
est-err-too-large = { $what }：每块 GPU 上将达 { $amount } 字节，超出了 oomlab 的计数范围（最多 { $limit } 字节）
est-err-config-too-long = config.json 有 { $bytes } 字节，超过了读取上限 { $max }
est-err-config-not-json = config.json 不是 JSON：{ $detail }
est-err-config-not-object = config.json 不是一个 JSON 对象
est-err-config-no-model-type = config.json 没有 model_type
est-err-config-unknown-family = 还不支持 model_type { $family }：oomlab 能读取的配置有 { $known }
est-err-config-unknown-key = { $family }：{ $key } 是 oomlab 在这一模型家族中不认识的键，因此不会默默跳过它（它可能改变显存占用）；如果它不改变任何东西，请删掉它
est-err-config-missing = { $family }：config.json 缺少 { $key }
est-err-config-not-positive = { $family }：{ $key } 必须是正整数（当前为 { $got }）
est-err-config-not-whole = { $family }：{ $key } 必须是整数（当前为 { $got }）
est-err-config-not-bool = { $family }：{ $key } 必须是 true 或 false
est-err-config-not-probability = { $family }：{ $key } 必须是小于 1 的概率（当前为 { $got }）
est-err-config-rotary-factor = { $family }：partial_rotary_factor 必须大于 0 且不超过 1（当前为 { $got }）
est-err-config-not-modelled = { $family }：不支持 { $key } = { $value }：{ $why }
# 配置中某个字段的值为何不被支持（上面的 { $why }）。
est-why-default-only = 只支持它的默认值 { $default }
est-why-gpt2-activation = 估算器的 GPT-2 MLP 用 GELU
est-why-gpt2-untied = GPT2LMHeadModel 无论这里怎么写都共享 lm_head 的权重
est-why-gpt2-dropouts = 与 resid_pdrop 不同的 dropout
est-why-neox-activation = 估算器的 GPT-NeoX MLP 用 GELU
est-why-neox-attention-bias = MLP 有偏置而注意力没有
est-why-neox-dropouts = GPT-NeoX 的 dropout（估算器的 GPT-NeoX 不保留任何 dropout）
est-why-gated-activation = 估算器的门控 MLP 是 SwiGLU（silu）和 Gemma 的 GeGLU
est-why-some-biases = 只有部分线性层有偏置
est-why-dropout = 这一家族中的 dropout（估算器的不保留任何 dropout）
est-why-scores-softcap = 只对注意力得分做软截断
est-why-logits-softcap = 只对 logits 做软截断
est-why-latent-kv-heads = 潜在注意力把键和值展开到每个注意力头
est-why-moe-layer-list = 除“每 interleave_moe_layer_step 层一层”以外的列表
est-why-no-rope-pattern = 除“每 no_rope_layer_interval 层一层”以外的模式
est-why-no-rotary-layer = 完全没有旋转位置编码层的模型
est-why-no-rope-list = 只读取由 0 和 1 组成的列表
est-why-no-rotary-tables = 完全没有旋转位置编码层的模型（没有 cos/sin 表）
est-why-router-logits = 负载均衡损失保存的路由器 logits
est-why-experts-per-token = 与 num_experts_per_tok（读取的是它）不同的值
est-why-router-jitter = 路由器输入上的抖动噪声
est-why-groups-divide = 不能整除专家数的分组
est-why-dense-among-mixture = 混合专家层之间的稠密 MLP 层
# 设置或架构所限定的大小（est-err-out-of-range 和 -at-most 中的 { $what }）。
est-size-micro-batch = micro-batch 大小
est-size-sequence = 序列长度
est-size-accumulation = 梯度累积步数
est-size-data-parallel = 数据并行 GPU 数
est-size-tensor-parallel = 张量并行 GPU 数
est-size-pipeline-stages = 流水线阶段数
est-size-context-parallel = 上下文并行 GPU 数
est-size-vocab = 词表大小（vocab）
est-size-hidden = 隐藏维度（hidden）
est-size-layers = 层数（layers）
est-size-heads = 注意力头数（heads）
est-size-kv-heads = 键/值头数（kv_heads）
est-size-ffn = MLP 宽度（ffn）
est-size-experts = 专家数（experts）
est-size-top-k = 每个 token 的专家数（top_k）
est-size-positions = 位置数（positions）
est-size-head-dim = 每个头的维度（head_dim）
est-size-rotary-dims = 旋转维度（rotary_dims）
est-size-shared-expert-width = 共享专家的宽度
est-size-dense-width = 稠密层的 MLP 宽度
est-size-dense-first = 开头的稠密层数
est-size-mixture-step = 混合专家层的步长（每几层一层）
# 会超过 oomlab 所报告的最大字节数的量（est-err-too-large 中的 { $what }）。
est-amount-peak = 峰值
est-amount-logits = 输出 logits
est-amount-logits-grad = logits 的梯度
est-amount-parameters = 参数
est-amount-gradients = 梯度
est-amount-optimizer-state = 优化器状态
est-amount-master-weights = 主权重
est-amount-activations = 激活值
est-amount-temporaries = 临时张量
est-amount-input = 输入
est-amount-in-flight = 在途的激活值
est-amount-autocast = autocast 的权重副本
est-amount-communication = 通信缓冲区
est-amount-fragmentation = 碎片余量
est-amount-working-set = 反向传播的工作集
est-amount-host-memory = 主机内存
est-amount-pcie = PCIe 传输量
est-amount-tokens = 每步的 token 数
est-amount-saved-for-backward = 为反向传播保存的张量

## 玩具模型的配置为何无法构建（应用的主区域、链接的提示、命令行的错误信息；`model::error`）

cfg-err-zero = { $name } 至少为 1（当前为 { $value }）
cfg-err-too-large = { $name } = { $value } 大得离谱（上限为 { $limit }）
cfg-err-heads-divide = d_model（{ $d }）必须能被注意力头数 n_heads（{ $heads }）整除
cfg-err-sequence-too-long = 序列长度 { $got } 超过了模型的最大序列长度 seq_len { $max }
cfg-err-token-out-of-range = 位置 { $position } 的 token id { $id } 超出了大小为 { $vocab } 的词表
cfg-err-tensor-limit = { $what }中的一个张量将有 { $amount } 个元素：超出了 oomlab 能规划的范围（最多 { $limit } 个元素）
cfg-err-step-limit = { $layers } 层 × { $micro } 个 micro-batch 的一步将有 { $amount } 个 op：超出了 oomlab 能规划的范围（最多 { $limit } 个 op）
cfg-err-unknown-lora-target = 未知的 LoRA 目标 { $got }：可选 qkv、proj、mlp 或 all
cfg-err-unknown-backend = 未知的后端 { $got }：可选 "gpu" 或 "cpu"
cfg-err-unknown-offload = 未知的卸载方式 { $got }：可选 none、optimizer（优化器状态）或 optimizer+gradients（优化器状态和梯度）
cfg-err-unknown-batching = 未知的批次组成方式 { $got }：可选 windows、padded、bucketed 或 packed
cfg-err-unknown-checkpointing = 未知的梯度检查点方式 { $got }：可选 off、blocks、every:K（每 K 个块一段）或 selective
cfg-err-unknown-attention = 未知的注意力实现 { $got }：可选 standard 或 fused
cfg-err-unknown-precision = 未知的精度 { $got }：可选 fp32、fp16 或 bf16
cfg-err-accum-divide = batch { $batch } 无法均分成 { $accum } 个 micro-batch：batch 必须是梯度累积步数的整数倍
cfg-err-lora-rank = LoRA 秩 { $rank } 不算低秩：它必须小于 d_model（{ $d }）
cfg-err-lora-alpha = LoRA 的 alpha 必须为正（当前为 { $alpha }）
cfg-err-allocator-not-key-value = 分配器选项 { $value }：应写成 key:value
cfg-err-allocator-unknown = 未知的分配器选项 { $value }（oomlab 模拟 max_split_size_mb、garbage_collection_threshold 和 expandable_segments）
cfg-err-allocator-max-split = max_split_size_mb:{ $value }：必须是大于 20 的整数 MiB（PyTorch 的规则：被拆分的块至少为 kLargeBuffer，即 20 MiB）
cfg-err-allocator-threshold = garbage_collection_threshold:{ $value }：必须是 0 到 1 之间的数（不含两端）
cfg-err-allocator-expandable = expandable_segments:{ $value }：必须是 True 或 False
cfg-err-gpus = 数据并行模拟 1 到 { $max } 块 GPU（当前为 { $gpus }）
cfg-err-bucket = 通信桶必须是 { $min } 个元素的整数倍，在 { $min } 到 { $max } 之间（当前为 { $elems }）
cfg-err-not-with-several-gpus = 多块 GPU 上不模拟{ $what }：请只用一块 GPU
cfg-err-doc-starts = { $why }：打包的批次（--batching packed）为每个位置给出它所在文档的开头，且只有它才有
cfg-err-offload-with = 在 oomlab 中，卸载到主机内存不能与 { $what } 同时运行：请关掉其中一个
cfg-err-offload-with-fp16 = 在 oomlab 中，卸载到主机内存不能与 fp16 的损失缩放同时运行（请改用 bf16）：请关掉其中一个
cfg-err-fused-with-selective = 选择性梯度检查点重新计算注意力概率，而融合注意力从不保存它们（它在反向传播中本来就重新计算得分）：二者只能选一个
cfg-err-fused-head = 融合注意力把一个头放在寄存器里，支持的头大小最多为 { $max }；这个模型的是 { $head }（d_model { $d } / { $heads } 个头）
cfg-err-optimizer = 无效的优化器设置：{ $name } = { $value }（它必须{ $range }）
cfg-err-not-in-vocabulary = 字符 { $char } 不在词表中
cfg-err-corpus-too-short = 语料只有 { $tokens } 个 token，不够组成长度为 { $seq } 的序列
cfg-err-batch-host = { $rows } 个 token 的 batch 放不进这台机器的主机内存
cfg-err-batch-length = batch 有 { $inputs } 个输入和 { $targets } 个目标，应为 { $expected }
# 配置设定的维度（cfg-err-zero 和 -too-large 中的 { $name }）。
cfg-dim-vocab = 词表大小 vocab
cfg-dim-seq-len = 最大序列长度 seq_len
cfg-dim-d-model = 模型宽度 d_model
cfg-dim-n-layers = 层数 n_layers
cfg-dim-n-heads = 注意力头数 n_heads
cfg-dim-batch = batch 大小
cfg-dim-sequence = 序列长度
cfg-dim-checkpoint-every = 梯度检查点 every:K
cfg-dim-accumulation = 梯度累积步数
cfg-dim-lora-rank = LoRA 秩
cfg-dim-effective-batch = 有效 batch
cfg-dim-global-batch = 全局 batch（所有 GPU 的）
cfg-dim-block-size = 块大小（token 数）
cfg-dim-cache-slots = KV 缓存槽位数
cfg-dim-table-width = 块表中的块数
# 可能超出 oomlab 规划范围的张量（cfg-err-tensor-limit 中的 { $what }）。
cfg-planned-parameters = 参数
cfg-planned-attention = 注意力概率（batch × 头数 × 序列长度²）
cfg-planned-logits = logits（batch × 序列长度 × 词表大小）
cfg-planned-mlp = MLP 激活值（batch × 序列长度 × 4·d）
cfg-planned-lora = LoRA 适配器
cfg-planned-kv-cache = KV 缓存（槽位 × 2 × d）或其块表
# 拒绝信息中提到的技术（cfg-err-not-with-several-gpus 和 -offload-with 中的 { $what }）。
cfg-tech-offload = 卸载到主机内存
cfg-tech-padded = 补齐和按长度分组的批次
cfg-tech-lora = LoRA 微调
cfg-tech-fp16 = fp16 的损失缩放
# 打包批次的文档开头为何被拒绝（cfg-err-doc-starts 中的 { $why }）。
cfg-starts-not-a-start = 有一个文档开头不是开头
cfg-starts-none = 这个批次没有文档开头
cfg-starts-not-packed = 计划的行不是打包的
# 优化器设置必须落在的范围（cfg-err-optimizer 中的 { $range }）。
cfg-range-positive-number = 是正数
cfg-range-unit = 在 [0, 1) 之内
cfg-range-positive = 为正
cfg-range-non-negative = 为零或正数

## 一步没有运行的原因：GPU、后端、CPU worker（`backend::error`、`backend::gpu`）
gpu-err-no-adapter = 没有找到 GPU 适配器（{ $detail }）；请使用 --backend cpu，或安装 Vulkan 驱动（例如 Mesa 的 lavapipe：apt install mesa-vulkan-drivers）
gpu-err-device = 无法打开 GPU 设备：{ $detail }
gpu-err-no-compute = { $detail } 适配器没有计算着色器
gpu-err-limit = { $what } 需要 { $needed }，但这个 GPU 适配器最多允许 { $limit }；请选择更小的配置
gpu-err-oom = GPU 显存溢出：{ $detail }
gpu-err-validation = GPU 拒绝了这项工作（验证错误）：{ $detail }
gpu-err-readback = 从 GPU 读回结果失败：{ $detail }
gpu-err-lost = GPU 设备丢失：{ $detail }
backend-err-shape = 批次是 { $batch }，但计划是按 { $plan } 构建的
backend-err-internal = oomlab 的内部错误中止了这一步（{ $error }）；请报告它
backend-err-not-produced = 算子 { $op } 需要张量 '{ $tensor }'，但这一步还没有产生它（请先运行前向传播）
backend-err-no-gpu = 要求使用 GPU 后端，但没有打开的 GPU
backend-err-worker-lost = CPU worker 停止了：{ $why }
backend-err-no-executor = CPU worker 没有这些设置的执行器
backend-err-cpu-only-uneven = 在多块模拟 GPU 上运行不同长度的批次目前只有 CPU 后端支持：请选择 CPU 后端
backend-err-cpu-only-mixed = 在多块模拟 GPU 上使用混合精度目前只有 CPU 后端支持：请选择 CPU 后端
backend-err-cancelled = 构建已取消
worker-lost-stopped = 它停止了
worker-lost-silent = 它在 { $secs } 秒内没有启动
worker-lost-garbled = 无法写入或读取一条消息：{ $detail }

## 玩具模型命令行自己的拒绝（`oomlab train`、`measure`、`sweep`、`dump-step`；`cli::config`），用系统的语言
cli-err-batch-syntax = 无法读取 --batch { $text }：请写成 16、1..512、1..512:8 或 1,2,4
cli-err-empty-range = --batch { $text }：这个范围是空的
cli-err-too-many-batches = --batch { $text } 给出了 { $count } 个 batch 大小；最多 100000 个
cli-err-batch-disagrees = --batch { $batch } 与 --micro-batch { $micro } × --accum { $accum } 不一致：--batch 和 --micro-batch 只给一个
cli-err-several-batches = --batch / --micro-batch 给出了多个大小；只有 `sweep` 接受范围
cli-err-dump-lora = dump-step 为 Hugging Face 写出整个模型在这一步的梯度；用 --lora 时没有这些梯度（基座被冻结）
cli-err-variable-length = --batching { $batching }：它的批次逐步从文档取得长度，而这个命令只计时一种序列长度；请用 windows 或 packed
cli-err-loss = 第 { $step } 步的 loss 变成了 { $loss }；试试更小的 --lr
cli-err-fragmented = 这是第 { $step } 步（长度 { $length }）：在同样预算的空 GPU 上它放得下，峰值时预留 { $reserved }——之前其他长度的步骤把缓存的显存切成了碎片。对策：--alloc-conf expandable_segments:True，或固定长度（--batching windows 或 packed）。
cli-err-no-device = 这个快照没有设备
cli-err-no-trace = 没有哪个设备有可以重放的轨迹
serve-err-layer-kind = layer_types 中的 { $kind } 是估算器尚未建模其缓存的注意力类型
serve-err-layer-count = layer_types 列出了 { $listed } 层，而模型有 { $layers } 层
serve-err-layer-width = 滑动窗口层或分块层需要给出宽度（{ $key }），但配置中没有
tab-serving = 推理服务
tab-serving-later = 目前推理服务只在桌面应用和命令行（oomlab serving）中运行：浏览器的模块还没有空间容纳它。
serving-heading = 批量推理：KV 缓存
serving-intro = 服务器为每个请求保存它的键和值——也就是 KV 缓存——从一个 token 保留到下一个，这样新 token 关注之前的 token 时就不用重新计算。同时服务的用户越多，缓存就越多。用这个小模型在真实的内核上服务一串请求，看看缓存的布局如何决定能同时容纳多少个请求。
serving-layout = 缓存的布局
serving-layout-contiguous = 连续式
serving-layout-growing = 增长式
serving-layout-paged = 分页式
serving-layout-contiguous-hint = 每个请求被接纳时就预留整个上下文（StaticCache、FasterTransformer、Orca）
serving-layout-growing-hint = 每一步 torch.cat 都通过缓存分配器把每层的键和值换成长一个 token 的新张量（transformers 的 DynamicCache）
serving-layout-paged-hint = 一个由 { $block } 个 token 的块组成的池；请求的最后一块满了才再取一块（vLLM）
serving-requests = 请求数
serving-budget = 预算（MiB）
serving-block-size = 块大小（token 数）
serving-run = 开始服务
serving-run-all = 用三种布局依次服务
serving-running = 正在用{ $layout }缓存服务：第 { $iteration } 轮迭代，{ $requests } 个请求中已完成 { $served } 个，{ $running } 个正在运行。
serving-none = 还没有服务过：选一种布局，然后点“开始服务”。
serving-summary = { $layout }：在 { $backend } 上服务了 { $served } 个请求，同时最多 { $peak } 个；{ $preemptions } 次被抢占后重新计算。
serving-setup = { $budget } 的预算：权重 { $weights }，最大一步的激活值 { $activations }（预测），缓存 { $cache }，可容纳 { $tokens } 个 token，每个 { $token_bytes } 字节。
serving-peak = 在峰值时缓存预留了 { $reserved }，其中 { $used } 存着 token（分配器）。
serving-waste = 整个运行中缓存预留的全部字节里，有 { $percent } % 没有存任何 token。
serving-oom = 显存溢出：{ $message }
serving-chart-heading = 逐轮迭代：正在运行的请求，以及缓存
serving-axis-iteration = 迭代
serving-axis-mib = 显存（MiB）
serving-line-running = 正在运行的请求
serving-line-reserved = 预留
serving-line-used = 存着 token
serving-chart-desc = 在 { $iterations } 轮迭代中，正在运行的请求最多达到 { $peak } 个；缓存的预留在 { $reserved } 达到峰值，其中 { $used } 存着 token。
serving-parts-heading = 峰值时预留的字节去了哪里
serving-part-used = 存着 token
serving-part-reservation = 预留：给尚未生成的 token 的槽位
serving-part-internal = 内部碎片：被请求占着、永远不会填满
serving-part-external = 外部碎片：分配器缓存着的空闲块
serving-part-line = { $name }：{ $bytes }（占 { $percent } %）
serving-map-heading = 峰值时的缓存，一块一块看（每个请求一种颜色；空白：空闲）
serving-map-desc = { $blocks } 个块：{ $held } 个被 { $requests } 个请求占用，{ $free } 个空闲。
serving-map-growing = 增长式缓存没有块：它的显存是缓存分配器的段，段里的张量每一步都被替换。
serving-compare-heading = 三种布局并排比较
serving-col-layout = 布局
serving-col-peak = 同时最多
serving-col-reserved = 峰值时预留
serving-col-used = 其中存着 token
serving-col-waste = 整个运行中浪费
serving-col-preemptions = 被抢占
serving-err-option = { $flag } 必须介于 { $min } 与 { $max } 之间（收到 { $value }）
serving-err-budget = { $budget } 的预算给 KV 缓存留不下空间：权重和最大一步的激活值就要 { $needed }
serving-err-cache = { $cache } 的 KV 缓存装不下任何请求：这种布局至少需要 { $needed }（增长式缓存需要缓存分配器最小的段；连续式缓存需要整个上下文的一行）
serving-err-vocab = 模型的词表（{ $model } 个 token）与语料的词表（{ $corpus } 个）不一致
serve-err-option = { $flag } 不能取 { $value }
serve-err-no-room = 权重、激活值和 PyTorch 之外的显存（{ $needed }）已占满运行时可用的 { $room }，没有留给 KV 缓存的空间
serve-err-context = { $context } 个词元的上下文超过了模型的上下文（{ $model }）：vLLM 拒绝超过配置的 max_model_len
serve-err-tp-vllm = 张量并行只对 vLLM 估算（--runtime vllm）
serve-err-fp8-vllm = fp8 缓存只对 vLLM 估算：transformers 的量化缓存会让最近的词元保持未量化
