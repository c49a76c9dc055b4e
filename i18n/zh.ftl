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
