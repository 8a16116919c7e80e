// A training step compiled once by the daemon, then run with one RunStep message per step.
// Type-checked by `npx tsc --noEmit -p examples/js` against the package's index.d.ts; run it with
// `npx tsc -p examples/js --outDir /tmp/pg-examples && node /tmp/pg-examples/compiled_step.js`.
import { Tensor, nn, compileStep, type CompiledStep } from 'polygrad';

class Regressor {
  l1 = new nn.Linear(8, 16);
  l2 = new nn.Linear(16, 1);

  forward(x: Tensor): Tensor {
    return this.l2.forward(this.l1.forward(x).tanh());
  }
}

async function main(): Promise<void> {
  Tensor.manualSeed(7);
  const model = new Regressor();
  const opt = new nn.SGD(nn.getParameters(model), { lr: 0.05, momentum: 0.9 });
  const target = Tensor.from([[0.5], [-1], [2], [0.25], [1], [-0.5], [0], [1.5]], { dtype: 'float32' });

  const trainStep = async (m: Regressor, o: nn.SGD, x: Tensor, y: Tensor): Promise<Tensor> => {
    const loss = m.forward(x).sub(y).square().mean();
    o.zeroGrad();
    loss.backward();
    await o.step();
    return loss;
  };

  const batch = (): [Tensor, Tensor] => {
    const x = Tensor.randn(32, 8);
    return [x, x.matmul(target)];
  };
  const [x0, y0] = batch();
  const step: CompiledStep = await compileStep(trainStep, model, opt, x0, y0);
  console.log(`compiled: ${step.nKernels} kernels per step, inputs ${step.inputNames.join(', ')}`);
  const losses: number[] = [];
  for (let i = 0; i < 40; i++) {
    const [x, y] = batch();
    await Tensor.realize(x, y);
    await step.run({ x, y }); // one small message: new inputs, kernels, in-place updates
    losses.push(await step.lossValue());
  }
  await step.release();
  const w = await model.l1.weight.data(); // the trained values, updated in place by every run
  console.log(`loss ${losses[0].toFixed(4)} -> ${losses[losses.length - 1].toFixed(4)} (${w.length} weights in l1)`);
  if (!(losses[losses.length - 1] < losses[0])) throw new Error('the loss did not go down');
}

main().catch((e: unknown) => {
  console.error(e);
  throw e;
});
