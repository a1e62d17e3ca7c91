const fs = require('fs');
const { execFileSync } = require('child_process');

exports.handler = async () => {
  execFileSync('echo', ['child-process-marker'], { stdio: 'inherit' });
  fs.writeSync(2, 'fd2-marker\n');
  for (let i = 0; i < 100; i++) fs.writeSync(1, `fd1-line-${String(i).padStart(3, '0')}\n`);
  return 'ok';
};
