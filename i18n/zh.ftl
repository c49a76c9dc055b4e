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
controls-compare = 对比
compare-checkpoint = 每个块设梯度检查点
compare-fused = 融合注意力
compare-accumulation = 梯度累积 ×4
controls-seed = 随机种子
controls-projector = 投影模式
run-one-step = 单步
run-train = 训练
run-stop = 停止
run-engine = 计算引擎：{ $backend }
