const fs = require('fs');
const path = require('path');

exports.handler = async () => {
  const cwd = fs.realpathSync(process.cwd());
  return {
    data: fs.readFileSync('data.txt', 'utf8').trim(),
    cwdIsTaskRoot: cwd === fs.realpathSync(process.env.LAMBDA_TASK_ROOT),
    cwdIsCodeDir: cwd === fs.realpathSync(path.join(__dirname, '..')),
  };
};
