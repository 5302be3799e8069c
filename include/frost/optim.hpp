// frost::optim: optimizers (SGD, Adam, AdamW, RMSprop), learning-rate
// schedulers, nn::utils::clip_grad_norm_ and amp::GradScaler.
#pragma once

#include "optim/optimizer.hpp"
#include "optim/sgd.hpp"
#include "optim/adam.hpp"
#include "optim/rmsprop.hpp"
#include "optim/lr_scheduler.hpp"
#include "optim/clip_grad.hpp"
#include "amp/grad_scaler.hpp"
